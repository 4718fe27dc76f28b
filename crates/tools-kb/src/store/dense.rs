//! The in-memory dense view of a snapshot: every vector, 8-bit quantized for the scan and
//! exact for re-scoring, searched with the same filters as the lexical side.

use tantivy::DocAddress;

use super::filters::Filters;
use super::snapshot::Hit;

/// The dense vectors of a snapshot, in memory, searched exactly.
#[derive(Debug)]
pub struct DenseView {
    pub(super) dims: usize,
    pub(super) vectors: Vec<f32>,
    /// The vectors scaled by 127 and rounded: a quarter of the memory to scan.
    pub(super) quantized: Vec<i8>,
    pub(super) addrs: Vec<DocAddress>,
    pub(super) paths_lc: Vec<String>,
    pub(super) exts: Vec<String>,
}

impl DenseView {
    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether it holds no vector.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The `limit` chunks most similar to `query` (cosine; vectors are unit length) among
    /// those passing `filters`.
    ///
    /// The scan compares 8-bit quantized vectors (a quarter of the memory traffic of f32),
    /// keeps four times `limit` candidates, and re-scores those with the exact f32 vectors; the
    /// scores returned are exact.
    pub fn search(&self, query: &[f32], filters: &Filters, limit: usize) -> Vec<Hit> {
        if query.len() != self.dims || limit == 0 {
            return Vec::new();
        }
        let q8: Vec<i8> = query.iter().map(|x| quantize(*x)).collect();
        let keep = (limit * 4).max(limit + 32);
        let rows = self.addrs.len();
        // Large views are scanned by two threads, each over half of the rows.
        let threads = if rows >= PARALLEL_SCAN_ROWS {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
        } else {
            1
        };
        let per = rows.div_ceil(threads.max(1));
        let scan = |from: usize| -> TopK {
            let to = (from + per).min(rows);
            let check = !filters.is_empty();
            let mut top = TopK::new(keep);
            let vectors = &self.quantized[from * self.dims..to * self.dims];
            for (i, v) in vectors.chunks_exact(self.dims).enumerate() {
                let row = from + i;
                if check && !filters.accepts(&self.paths_lc[row], &self.exts[row]) {
                    continue;
                }
                top.push(dot_i8(&q8, v) as f32, row);
            }
            top
        };
        let mut top = if threads <= 1 {
            scan(0)
        } else {
            std::thread::scope(|s| {
                let other = s.spawn(|| scan(per));
                let mut mine = scan(0);
                if let Ok(theirs) = other.join() {
                    for (score, row) in theirs.into_sorted() {
                        mine.push(score, row);
                    }
                }
                mine
            })
        };
        let mut exact = TopK::new(limit);
        for (_, row) in std::mem::take(&mut top).into_sorted() {
            let v = &self.vectors[row * self.dims..(row + 1) * self.dims];
            exact.push(dot(query, v), row);
        }
        exact
            .into_sorted()
            .into_iter()
            .map(|(score, row)| Hit {
                addr: self.addrs[row],
                score,
            })
            .collect()
    }

    /// The vector of the chunk at `addr`, if it has one.
    pub fn vector_of(&self, addr: DocAddress) -> Option<&[f32]> {
        let row = self.addrs.binary_search(&addr).ok()?;
        self.vectors.get(row * self.dims..(row + 1) * self.dims)
    }
}

/// An f32 in -1..1 as a signed byte (×127, rounded, clamped).
pub(super) fn quantize(x: f32) -> i8 {
    (x * 127.0).round().clamp(-127.0, 127.0) as i8
}

/// Dot product of quantized vectors, in i32 (exact for up to 133k dimensions).
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut sum: i32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += i32::from(*x) * i32::from(*y);
    }
    sum
}

/// Dot product, written so the compiler vectorizes it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// Views with at least this many vectors are scanned by two threads.
const PARALLEL_SCAN_ROWS: usize = 20_000;

/// A bounded min-heap keeping the `k` best (score, row) pairs.
#[derive(Default)]
struct TopK {
    k: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, usize)>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF32(f32);
impl Eq for OrdF32 {}
impl PartialOrd for OrdF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: std::collections::BinaryHeap::with_capacity(k + 1),
        }
    }
    fn push(&mut self, score: f32, row: usize) {
        if self.heap.len() < self.k {
            self.heap.push(std::cmp::Reverse((OrdF32(score), row)));
        } else if let Some(std::cmp::Reverse((min, _))) = self.heap.peek()
            && score > min.0
        {
            self.heap.pop();
            self.heap.push(std::cmp::Reverse((OrdF32(score), row)));
        }
    }
    fn into_sorted(self) -> Vec<(f32, usize)> {
        let mut v: Vec<(f32, usize)> = self
            .heap
            .into_iter()
            .map(|std::cmp::Reverse((s, r))| (s.0, r))
            .collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let mut t = TopK::new(3);
        for (i, s) in [0.1, 0.9, 0.5, 0.7, 0.2].into_iter().enumerate() {
            t.push(s, i);
        }
        let rows: Vec<usize> = t.into_sorted().into_iter().map(|(_, r)| r).collect();
        assert_eq!(rows, [1, 3, 2]);
    }

    #[test]
    fn the_two_thread_scan_finds_the_same_best_rows_as_a_naive_one() {
        let dims = 8;
        let rows = PARALLEL_SCAN_ROWS + 123;
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let vectors: Vec<f32> = (0..rows * dims).map(|_| next()).collect();
        let view = DenseView {
            dims,
            addrs: (0..rows as u32).map(|d| DocAddress::new(0, d)).collect(),
            paths_lc: (0..rows).map(|i| format!("/p{}", i % 3)).collect(),
            exts: vec!["md".into(); rows],
            quantized: vectors.iter().map(|x| quantize(*x)).collect(),
            vectors,
        };
        let q: Vec<f32> = (0..dims).map(|_| next()).collect();
        let mut naive: Vec<(f32, u32)> = view
            .vectors
            .chunks_exact(dims)
            .enumerate()
            .map(|(i, v)| (dot(&q, v), i as u32))
            .collect();
        naive.sort_by(|a, b| b.0.total_cmp(&a.0));
        let got: Vec<u32> = view
            .search(&q, &Filters::default(), 10)
            .iter()
            .map(|h| h.addr.doc_id)
            .collect();
        let want: Vec<u32> = naive.iter().take(10).map(|x| x.1).collect();
        assert_eq!(got, want);
        let filtered = view.search(
            &q,
            &Filters {
                path_contains: Some("/p1".into()),
                ..Default::default()
            },
            5,
        );
        assert!(filtered.iter().all(|h| h.addr.doc_id % 3 == 1));
    }

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..21).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }
}

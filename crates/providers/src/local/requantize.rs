//! Tensors in a quantization candle has no SIMD kernel for are converted to `Q8_0` as the
//! model is read.
//!
//! candle's CPU matrix products have AVX2/NEON dot products for `Q4_0`, `Q8_0` and the
//! k-quants, but `Q4_1`, `Q5_0` and `Q5_1` fall back to a scalar loop. SmolLM2's GGUF is
//! `Q4_1`: measured on the 2-core machine, prompts ran at 60–70 tokens/s and answers at
//! about 21 tokens/s that way. `Q8_0` has the same block of 32 values, represents every
//! `Q4_1` value within half a step of 1/127 of its block's largest value, and has a SIMD
//! kernel, so the converted model computes nearly the same numbers many times faster (see
//! docs/PERFORMANCE.md). The price is memory: `Q8_0` takes 34 bytes per 32 values where
//! `Q4_1` took 20.

use std::io::{Cursor, Read, Seek};

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

/// Whether candle multiplies `dtype` with a scalar loop on this build's CPU features.
pub fn lacks_simd_kernel(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// A model's tensors held in memory by [`convert`].
pub struct Converted {
    /// The tensors' data, for `gguf_file::Content::tensor` with the rewritten table.
    pub reader: Cursor<Vec<u8>>,
    /// How many tensors were converted.
    pub tensors: usize,
}

/// The model's tensors in memory, those without a SIMD kernel converted to `Q8_0`, and
/// `content`'s tensor table rewritten to point into that memory. `None` when no tensor
/// needs converting (the file is then read as it is).
///
/// Why the model's tensors could not be converted: the file is damaged, or candle cannot
/// handle one of its tensor types. Use another copy or quantization of the model.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A tensor could not be read from the file.
    #[error("cannot read tensor {name}: {source}")]
    Read {
        /// The tensor.
        name: String,
        /// candle's error.
        source: candle_core::Error,
    },
    /// A tensor could not be converted to `Q8_0`.
    #[error("cannot convert tensor {name}: {source}")]
    Convert {
        /// The tensor.
        name: String,
        /// candle's error.
        source: candle_core::Error,
    },
    /// A tensor's data could not be copied out.
    #[error("cannot copy tensor {name}: {source}")]
    Copy {
        /// The tensor.
        name: String,
        /// candle's error.
        source: candle_core::Error,
    },
}

/// # Errors
/// A [`ConvertError`] when a tensor cannot be read or converted.
pub fn convert(
    content: &mut gguf_file::Content,
    file: &mut (impl Read + Seek),
) -> Result<Option<Converted>, ConvertError> {
    if !content
        .tensor_infos
        .values()
        .any(|t| lacks_simd_kernel(t.ggml_dtype))
    {
        return Ok(None);
    }
    let mut names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    names.sort();
    let mut data = Vec::new();
    let mut converted = 0usize;
    for name in names {
        let Some(info) = content.tensor_infos.get_mut(&name) else {
            continue;
        };
        let tensor = info
            .read(file, content.tensor_data_offset, &Device::Cpu)
            .map_err(|source| ConvertError::Read {
                name: name.clone(),
                source,
            })?;
        let tensor = if lacks_simd_kernel(info.ggml_dtype) {
            converted += 1;
            to_q8_0(&tensor).map_err(|source| ConvertError::Convert {
                name: name.clone(),
                source,
            })?
        } else {
            tensor
        };
        let bytes = tensor.data().map_err(|source| ConvertError::Copy {
            name: name.clone(),
            source,
        })?;
        // GGUF aligns tensor data to 32 bytes; keep that, so views of it stay aligned.
        data.resize(data.len().next_multiple_of(32), 0);
        info.offset = data.len() as u64;
        info.ggml_dtype = tensor.dtype();
        data.extend_from_slice(&bytes);
    }
    content.tensor_data_offset = 0;
    Ok(Some(Converted {
        reader: Cursor::new(data),
        tensors: converted,
    }))
}

fn to_q8_0(tensor: &QTensor) -> candle_core::Result<QTensor> {
    let values = tensor.dequantize(&Device::Cpu)?;
    QTensor::quantize(&values, GgmlDType::Q8_0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;

    /// A GGUF file in memory holding `tensors`.
    fn gguf(tensors: &[(&str, &QTensor)]) -> Cursor<Vec<u8>> {
        let mut buf = Cursor::new(Vec::new());
        gguf_file::write(&mut buf, &[], tensors).unwrap();
        buf.set_position(0);
        buf
    }

    fn values(n: usize) -> Tensor {
        let v: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        Tensor::from_vec(v, (n / 64, 64), &Device::Cpu).unwrap()
    }

    #[test]
    fn q4_1_tensors_become_q8_0_with_the_same_values_and_others_stay_as_they_are() {
        let x = values(256);
        let slow = QTensor::quantize(&x, GgmlDType::Q4_1).unwrap();
        let fast = QTensor::quantize(&x, GgmlDType::Q4_0).unwrap();
        let mut file = gguf(&[("a.weight", &slow), ("b.weight", &fast)]);
        let mut content = gguf_file::Content::read(&mut file).unwrap();
        let Converted {
            reader: mut memory,
            tensors,
        } = convert(&mut content, &mut file).unwrap().unwrap();
        assert_eq!(tensors, 1);

        let a = content
            .tensor(&mut memory, "a.weight", &Device::Cpu)
            .unwrap();
        assert_eq!(a.dtype(), GgmlDType::Q8_0);
        let values = |t: &QTensor| -> Vec<f32> {
            let v = t.dequantize(&Device::Cpu).unwrap();
            v.flatten_all().unwrap().to_vec1().unwrap()
        };
        let (before, after) = (values(&slow), values(&a));
        let worst = before
            .iter()
            .zip(&after)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0f32, f32::max);
        // Values up to 2 in magnitude: Q8_0's step is at most 2/127.
        assert!(worst <= 1.0 / 127.0 + 1e-6, "largest difference {worst}");

        let b = content
            .tensor(&mut memory, "b.weight", &Device::Cpu)
            .unwrap();
        assert_eq!(b.dtype(), GgmlDType::Q4_0);
        assert_eq!(b.data().unwrap(), fast.data().unwrap());
    }

    #[test]
    fn a_model_whose_tensors_all_have_simd_kernels_is_left_alone() {
        let fast = QTensor::quantize(&values(128), GgmlDType::Q8_0).unwrap();
        let mut file = gguf(&[("w", &fast)]);
        let mut content = gguf_file::Content::read(&mut file).unwrap();
        assert!(convert(&mut content, &mut file).unwrap().is_none());
        assert!(!lacks_simd_kernel(GgmlDType::Q4K));
        assert!(lacks_simd_kernel(GgmlDType::Q4_1));
    }
}

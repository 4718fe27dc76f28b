//! A run's journal in PostgreSQL: appends checked against the lease in the same statement,
//! the run's end, and reading the lines back.

use serde_json::Value;

use super::PgRuns;
use crate::StoreError;
use crate::error::OpError;

impl PgRuns {
    /// Append line `seq` of `run_id`'s journal, if this process holds its lease; `topic`,
    /// when given, becomes the run's topic (its `run_started` line says it).
    ///
    /// Safe to repeat: the same line already stored under `seq` (an append whose answer was
    /// lost with the connection) counts as written.
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] when another process holds the run, or a different line
    /// is stored under `seq`; the database fails.
    pub fn append(
        &self,
        run_id: &str,
        seq: u64,
        line: &str,
        topic: Option<&str>,
    ) -> Result<(), StoreError> {
        self.append_lines(run_id, &[(seq, line.to_string())], topic)
    }

    /// Append consecutive lines of `run_id`'s journal (`(seq, line)`, in order) in one
    /// statement and one commit, if this process holds its lease: all of them or none.
    /// `topic` as in [`PgRuns::append`]; safe to repeat likewise.
    ///
    /// # Errors
    /// As [`PgRuns::append`].
    pub fn append_lines(
        &self,
        run_id: &str,
        lines: &[(u64, String)],
        topic: Option<&str>,
    ) -> Result<(), StoreError> {
        let Some(last) = lines.last().map(|(seq, _)| *seq) else {
            return Ok(());
        };
        let too_large = |seq: u64| StoreError::Query {
            what: "appending a journal line",
            reason: format!("line number {seq} is too large"),
        };
        let seqs = lines
            .iter()
            .map(|(seq, _)| i64::try_from(*seq).map_err(|_| too_large(*seq)))
            .collect::<Result<Vec<i64>, _>>()?;
        let last = i64::try_from(last).map_err(|_| too_large(last))?;
        let texts: Vec<String> = lines.iter().map(|(_, line)| line.clone()).collect();
        let (run_id, owner, topic) = (
            run_id.to_string(),
            self.owner.clone(),
            topic.map(str::to_string),
        );
        let count = u64::try_from(lines.len()).unwrap_or(u64::MAX);
        self.db.blocking("appending to a journal", move |c| {
            let (run_id, owner, topic, seqs, texts) = (
                run_id.clone(),
                owner.clone(),
                topic.clone(),
                seqs.clone(),
                texts.clone(),
            );
            async move {
                let written = c
                    .execute(
                        "WITH held AS ( \
                           UPDATE lsm_runs SET last_seq = $3, topic = coalesce($4, topic) \
                           WHERE run_id = $1 AND lease_owner = $2 RETURNING run_id) \
                         INSERT INTO lsm_run_events (run_id, seq, line) \
                         SELECT held.run_id, l.seq, l.line \
                         FROM held, unnest($5::bigint[], $6::text[]) AS l(seq, line)",
                        &[&run_id, &owner, &last, &topic, &seqs, &texts],
                    )
                    .await;
                match written {
                    Ok(n) if n == count => Ok(()),
                    Ok(_) => Err(lease_lost(&c, &run_id).await.into()),
                    Err(e)
                        if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                    {
                        // One statement: an earlier attempt stored all the lines or none.
                        let stored = c
                            .query(
                                "SELECT seq, line FROM lsm_run_events \
                                 WHERE run_id = $1 AND seq = ANY($2) ORDER BY seq",
                                &[&run_id, &seqs],
                            )
                            .await?;
                        let same = stored.len() == seqs.len()
                            && stored.iter().zip(seqs.iter().zip(&texts)).all(
                                |(r, (seq, line))| {
                                    r.get::<_, i64>(0) == *seq && r.get::<_, String>(1) == *line
                                },
                            );
                        if same {
                            Ok(())
                        } else {
                            let detail = match seqs.as_slice() {
                                [seq] => format!("line {seq} was written by another process"),
                                _ => format!(
                                    "lines {}–{} were written by another process",
                                    seqs.first().copied().unwrap_or_default(),
                                    seqs.last().copied().unwrap_or_default()
                                ),
                            };
                            Err(StoreError::LeaseLost {
                                run_id: run_id.clone(),
                                detail,
                            }
                            .into())
                        }
                    }
                    Err(e) => Err(e.into()),
                }
            }
        })
    }

    /// End `run_id` with `status` and `summary`, giving its lease up (a run someone asked
    /// to stop and that stopped is recorded `cancelled`).
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] when this process does not hold it; the database fails.
    pub fn finish(&self, run_id: &str, status: &str, summary: Value) -> Result<(), StoreError> {
        let (run_id, owner, status) = (run_id.to_string(), self.owner.clone(), status.to_string());
        self.db.blocking("ending a run", move |c| {
            let (run_id, owner, status, summary) = (
                run_id.clone(),
                owner.clone(),
                status.clone(),
                summary.clone(),
            );
            async move {
                let n = c
                    .execute(
                        "UPDATE lsm_runs SET \
                           status = CASE WHEN cancel_requested AND $3 = 'stopped' \
                                         THEN 'cancelled' ELSE $3 END, \
                           summary = $4, finished_at = now(), lease_owner = NULL, \
                           lease_until = NULL \
                         WHERE run_id = $1 AND lease_owner = $2",
                        &[&run_id, &owner, &status, &summary],
                    )
                    .await?;
                if n == 1 {
                    Ok(())
                } else {
                    Err(lease_lost(&c, &run_id).await.into())
                }
            }
        })
    }

    /// Every line of `run_id`'s journal, in order (empty for a run that never started).
    ///
    /// # Errors
    /// The database fails.
    pub fn read(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let run_id = run_id.to_string();
        self.db.blocking("reading a journal", move |c| {
            let run_id = run_id.clone();
            async move { lines_after(&c, &run_id, 0, None).await }
        })
    }

    /// The lines of `run_id`'s journal after `after_seq`, at most `limit`, in order, with
    /// their numbers (for following a run).
    ///
    /// # Errors
    /// The database fails.
    pub async fn lines_after(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let run_id = run_id.to_string();
        self.db
            .run("reading a journal", move |c| {
                let run_id = run_id.clone();
                async move {
                    let rows = c
                        .query(
                            "SELECT seq, line FROM lsm_run_events \
                             WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                            &[&run_id, &after_seq, &limit],
                        )
                        .await?;
                    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                }
            })
            .await
    }
}

async fn lines_after(
    c: &tokio_postgres::Client,
    run_id: &str,
    after: i64,
    limit: Option<i64>,
) -> Result<Vec<String>, OpError> {
    let rows = c
        .query(
            "SELECT line FROM lsm_run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq \
             LIMIT $3",
            &[&run_id, &after, &limit.unwrap_or(i64::MAX)],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Why an append or end of `run_id` was refused: who holds it now.
async fn lease_lost(c: &tokio_postgres::Client, run_id: &str) -> StoreError {
    let detail = match c
        .query_opt(
            "SELECT status, lease_owner FROM lsm_runs WHERE run_id = $1",
            &[&run_id],
        )
        .await
    {
        Ok(Some(r)) => {
            let status: String = r.get(0);
            match r.get::<_, Option<String>>(1) {
                Some(owner) => format!("{owner} holds it now"),
                None => format!("it is {status} and nobody holds it"),
            }
        }
        Ok(None) => "there is no such run".into(),
        Err(e) => crate::error::describe(&e),
    };
    StoreError::LeaseLost {
        run_id: run_id.to_string(),
        detail,
    }
}

//! The schema, created and migrated automatically in numbered steps. Each step runs in one
//! transaction with the version it brings recorded in `lsm_schema_migrations`, under an
//! advisory lock, so that many processes starting at once migrate once.

use deadpool_postgres::Object;

use crate::StoreError;
use crate::error::OpError;

/// The steps, in order: version and SQL.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_runs.sql")),
    (2, include_str!("migrations/0002_memory.sql")),
];

/// The newest version this program knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |(v, _)| *v)
}

/// Key of the advisory lock migrations hold (any constant of our own).
const LOCK_KEY: i64 = 0x006c_736d_5f6d_6967;

/// Bring the schema `schema` up to [`latest`]; returns the version it was at before.
///
/// # Errors
/// A failed statement; [`StoreError::SchemaTooNew`] when the database is newer than this
/// program.
pub(crate) async fn apply(mut client: Object, schema: &str) -> Result<i32, OpError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?;
    // `schema` is checked to be a plain identifier by the settings.
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.lsm_schema_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await?;
    let row = tx
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {schema}.lsm_schema_migrations"),
            &[],
        )
        .await?;
    let found: i32 = row.get(0);
    if found > latest() {
        return Err(StoreError::SchemaTooNew {
            found,
            known: latest(),
        }
        .into());
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tracing::info!("migrating the PostgreSQL schema {schema} to version {version}");
        tx.batch_execute(&format!("SET LOCAL search_path TO {schema};\n{sql}"))
            .await?;
        tx.execute(
            &format!("INSERT INTO {schema}.lsm_schema_migrations (version) VALUES ($1)"),
            &[version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(found)
}

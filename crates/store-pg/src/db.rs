//! [`Db`]: a pool of connections on a runtime of its own, for synchronous and async callers,
//! retrying while the server is away.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};

use crate::error::{OpError, connection_lost, describe};
use crate::{PgSettings, StoreError, migrate, tls};

/// A pool of connections to one database, on a runtime of its own.
///
/// The runtime is the store's so that a synchronous caller can wait for an operation
/// whatever runtime (or none) it is on: the operation never needs the caller's threads.
/// Connections the server closed (a restart) are dropped from the pool and made again.
pub struct Db {
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Pool,
    settings: PgSettings,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("target", &self.settings.target())
            .field("schema", &self.settings.schema)
            .finish_non_exhaustive()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            // Allowed on any thread, an async one included.
            rt.shutdown_background();
        }
    }
}

impl Db {
    /// Connect to the database `settings` name and bring its schema up to date (waiting up
    /// to `settings.retry_for` for the server).
    ///
    /// # Errors
    /// Bad settings; the server unreachable for the whole retry window; a failed
    /// migration; a database migrated by a newer lsm.
    pub fn connect(settings: PgSettings) -> Result<Arc<Db>, StoreError> {
        let config = settings.client_config()?;
        let tls = tls::connector(&settings)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("lsm-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Settings(format!("cannot start the store's runtime: {e}")))?;
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = {
            let _entered = runtime.enter();
            Pool::builder(manager)
                .max_size(settings.pool_size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .create_timeout(Some(Duration::from_secs(10)))
                .wait_timeout(Some(Duration::from_secs(30)))
                .build()
                .map_err(|e| StoreError::Settings(format!("cannot build the pool: {e}")))?
        };
        let db = Arc::new(Db {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool,
            settings,
        });
        let schema = db.settings.schema.clone();
        db.blocking("migrating the schema", move |client| {
            let schema = schema.clone();
            async move { migrate::apply(client, &schema).await }
        })?;
        Ok(db)
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &PgSettings {
        &self.settings
    }

    /// Run `op` on a pooled connection and wait for it on this thread (which may be any
    /// thread, an async runtime's included: the wait blocks it like a file write would).
    /// `op` is run again on a fresh connection while the connection is lost, for up to the
    /// retry window, so it must be safe to repeat.
    ///
    /// # Errors
    /// What `op` fails with; [`StoreError::Connect`] when the server stayed away.
    pub fn blocking<T, F, Fut>(&self, what: &'static str, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, OpError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let attempt = retrying(
            self.pool.clone(),
            self.settings.target(),
            self.settings.retry_for,
            what,
            op,
        );
        self.handle.spawn(async move {
            let _ = tx.send(attempt.await);
        });
        rx.recv().map_err(|_| StoreError::Shutdown)?
    }

    /// [`Db::blocking`] for async callers.
    ///
    /// # Errors
    /// As [`Db::blocking`].
    pub async fn run<T, F, Fut>(&self, what: &'static str, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, OpError>> + Send + 'static,
    {
        let attempt = retrying(
            self.pool.clone(),
            self.settings.target(),
            self.settings.retry_for,
            what,
            op,
        );
        self.handle
            .spawn(attempt)
            .await
            .map_err(|_| StoreError::Shutdown)?
    }
}

async fn retrying<T, F, Fut>(
    pool: Pool,
    target: String,
    retry_for: Duration,
    what: &'static str,
    op: F,
) -> Result<T, StoreError>
where
    F: Fn(Object) -> Fut,
    Fut: Future<Output = Result<T, OpError>>,
{
    let deadline = Instant::now() + retry_for;
    let mut delay = Duration::from_millis(50);
    loop {
        let lost = match pool.get().await {
            Ok(client) => match op(client).await {
                Ok(v) => return Ok(v),
                Err(OpError::Store(e)) => return Err(e),
                Err(OpError::Pg(e)) if connection_lost(&e) => describe(&e),
                Err(OpError::Pg(e)) => {
                    return Err(StoreError::Query {
                        what,
                        reason: describe(&e),
                    });
                }
            },
            // A refusal (a wrong password, no such database) will not go away by waiting.
            Err(deadpool_postgres::PoolError::Backend(e)) if !connection_lost(&e) => {
                return Err(StoreError::Connect {
                    target,
                    reason: describe(&e),
                });
            }
            Err(e) => pool_error(&e),
        };
        if Instant::now() + delay > deadline {
            return Err(StoreError::Connect {
                target,
                reason: lost,
            });
        }
        tracing::warn!("PostgreSQL at {target} is unavailable ({lost}) while {what}; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

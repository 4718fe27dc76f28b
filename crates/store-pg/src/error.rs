//! [`StoreError`].

/// What went wrong with the PostgreSQL store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `[store]` settings cannot be used; fix them (the message says which and how).
    #[error("[store] {0}")]
    Settings(String),
    /// The server could not be reached, or refused us, for longer than the retry window.
    /// Check that PostgreSQL is running and the URL, user and password are right.
    #[error("cannot reach PostgreSQL at {target}: {reason}")]
    Connect {
        /// Host, port and database (never the password).
        target: String,
        /// What the client said.
        reason: String,
    },
    /// A statement failed (the message names what it was for).
    #[error("PostgreSQL: {what}: {reason}")]
    Query {
        /// What the statement was for.
        what: &'static str,
        /// What the server or client said.
        reason: String,
    },
    /// The database was migrated by a newer lsm than this one: upgrade lsm.
    #[error(
        "the database schema is at version {found}, newer than this lsm knows ({known}); upgrade lsm"
    )]
    SchemaTooNew {
        /// The version recorded in the database.
        found: i32,
        /// The newest version this program knows.
        known: i32,
    },
    /// This process does not hold the run's lease (another process took the run over, or
    /// the lease was never taken): stop driving it.
    #[error("run {run_id} is not leased to this process ({detail})")]
    LeaseLost {
        /// The run.
        run_id: String,
        /// Who holds it, if anyone.
        detail: String,
    },
    /// The store's own runtime is gone (the program is shutting down).
    #[error("the PostgreSQL store is shut down")]
    Shutdown,
}

impl StoreError {
    /// Whether the error is the connection's, not the statement's: worth retrying once a
    /// connection can be made again.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Connect { .. })
    }
}

/// A client error as one line, with the server's message when there is one.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

/// Whether `e` means the connection is unusable (closed, reset, the server shutting down)
/// rather than that the statement was wrong.
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        // 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 08xxx
        // connection exceptions.
        Some(db) => {
            let code = db.code().code();
            code.starts_with("57P") || code.starts_with("08")
        }
        // No server error: an I/O failure on the socket.
        None => true,
    }
}

/// What one attempt of an operation can fail with.
#[derive(Debug)]
pub enum OpError {
    /// A client or server error: retried when it means the connection is gone.
    Pg(tokio_postgres::Error),
    /// An answer that ends the operation (never retried).
    Store(StoreError),
}

impl From<tokio_postgres::Error> for OpError {
    fn from(e: tokio_postgres::Error) -> Self {
        OpError::Pg(e)
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        OpError::Store(e)
    }
}

//! [`PgSettings`]: how to reach the server.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::StoreError;

/// The environment variable the password comes from (then libpq's `PGPASSWORD`).
pub const PASSWORD_ENV: &str = "LSM_STORE_PASSWORD";

/// The schema lsm's tables live in unless configured otherwise.
pub const SCHEMA_DEFAULT: &str = "lsm";

/// How to reach the PostgreSQL server.
#[derive(Debug, Clone, PartialEq)]
pub struct PgSettings {
    /// `postgres://user@host:port/database[?sslmode=disable|prefer|require]`, without a
    /// password.
    pub url: String,
    /// The schema of lsm's tables (created when missing): one database can hold several
    /// independent deployments.
    pub schema: String,
    /// Connections in the pool.
    pub pool_size: usize,
    /// A PEM file of the certificate authorities the server's certificate must chain to.
    /// Without it, TLS (when `sslmode` asks for it) encrypts without checking the
    /// certificate, as libpq's `sslmode=require` does.
    pub ca_file: Option<PathBuf>,
    /// How long an operation keeps retrying while the server cannot be reached (a restart,
    /// a fail-over) before it fails.
    pub retry_for: Duration,
}

impl PgSettings {
    /// Settings for `url` with the defaults: schema `lsm`, 8 connections, no CA file, a
    /// 60-second retry window.
    pub fn new(url: impl Into<String>) -> Self {
        PgSettings {
            url: url.into(),
            schema: SCHEMA_DEFAULT.to_string(),
            pool_size: 8,
            ca_file: None,
            retry_for: Duration::from_secs(60),
        }
    }

    /// The same with `schema`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Check the settings without connecting.
    ///
    /// # Errors
    /// [`StoreError::Settings`] naming what is wrong and how to fix it.
    pub fn validate(&self) -> Result<(), StoreError> {
        self.client_config_with(None).map(|_| ())
    }

    /// Host, port and database, for messages (never the password).
    pub fn target(&self) -> String {
        match tokio_postgres::Config::from_str(&self.url) {
            Ok(c) => {
                let host = c
                    .get_hosts()
                    .first()
                    .map(|h| match h {
                        tokio_postgres::config::Host::Tcp(name) => name.clone(),
                        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
                    })
                    .unwrap_or_else(|| "localhost".into());
                let port = c.get_ports().first().copied().unwrap_or(5432);
                format!("{host}:{port}/{}", c.get_dbname().unwrap_or("(default)"))
            }
            Err(_) => "(an unparsable URL)".into(),
        }
    }

    /// The client configuration: the URL, the password from the environment, the schema
    /// on the search path.
    pub(crate) fn client_config(&self) -> Result<tokio_postgres::Config, StoreError> {
        let password = std::env::var(PASSWORD_ENV)
            .ok()
            .or_else(|| std::env::var("PGPASSWORD").ok())
            .filter(|p| !p.is_empty());
        self.client_config_with(password)
    }

    fn client_config_with(
        &self,
        password: Option<String>,
    ) -> Result<tokio_postgres::Config, StoreError> {
        if !(self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")) {
            return Err(StoreError::Settings(format!(
                "url = {:?} is not a postgres:// URL (postgres://USER@HOST:PORT/DATABASE)",
                redact_url(&self.url)
            )));
        }
        let mut config = tokio_postgres::Config::from_str(&self.url).map_err(|e| {
            StoreError::Settings(format!(
                "url = {:?} cannot be read: {e}",
                redact_url(&self.url)
            ))
        })?;
        if config.get_password().is_some() {
            return Err(StoreError::Settings(format!(
                "url holds a password: take it out of the URL and set {PASSWORD_ENV} (or \
                 PGPASSWORD) in the environment instead"
            )));
        }
        if config.get_user().is_none() {
            return Err(StoreError::Settings(
                "url names no user: postgres://USER@HOST:PORT/DATABASE".into(),
            ));
        }
        if !valid_identifier(&self.schema) {
            return Err(StoreError::Settings(format!(
                "schema = {:?} must be a lower-case identifier (letters, digits, _; not \
                 starting with a digit)",
                self.schema
            )));
        }
        if self.pool_size == 0 {
            return Err(StoreError::Settings("pool_size must be at least 1".into()));
        }
        if let Some(p) = password {
            config.password(p);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        if config.get_application_name().is_none() {
            config.application_name("lsm");
        }
        config.options(format!("-c search_path={}", self.schema));
        Ok(config)
    }
}

/// Whether `s` is a plain lower-case SQL identifier (safe to put into statements unquoted).
pub(crate) fn valid_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && s.len() <= 63
}

/// `url` with anything between `://` and `@` cut to the user name.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_refused_and_not_repeated() {
        let e = PgSettings::new("postgres://lsm:hunter2@127.0.0.1/lsm")
            .validate()
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains(PASSWORD_ENV), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn bad_urls_and_schemas_are_explained() {
        let e = PgSettings::new("mysql://x@h/db").validate().unwrap_err();
        assert!(e.to_string().contains("not a postgres:// URL"), "{e}");
        let e = PgSettings::new("postgres://127.0.0.1/db")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("names no user"), "{e}");
        let e = PgSettings::new("postgres://u@h/db")
            .with_schema("Robert'); DROP")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("lower-case identifier"), "{e}");
        PgSettings::new("postgres://u@h:5433/db?sslmode=require")
            .validate()
            .unwrap();
    }

    #[test]
    fn the_target_names_host_port_and_database() {
        assert_eq!(
            PgSettings::new("postgres://u@db.example:6543/runs").target(),
            "db.example:6543/runs"
        );
    }
}

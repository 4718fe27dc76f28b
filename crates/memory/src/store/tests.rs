use super::*;

#[test]
fn fts_queries_quote_every_word() {
    let terms = crate::backend::query_terms("What is my favourite colour? NEAR(x)");
    assert_eq!(fts_query(&terms), "\"favourite\" OR \"colour\" OR \"near\"");
}

#[cfg(unix)]
#[test]
fn the_global_database_follows_the_user_data_folder() {
    // The lookup reads the process environment: each case runs this test again in a
    // child process with the environment set, which checks the answer.
    const WANT: &str = "LSM_TEST_GLOBAL_DB_WANT";
    if let Some(want) = std::env::var_os(WANT) {
        assert_eq!(default_global_db().map(PathBuf::into_os_string), Some(want));
        return;
    }
    let case = |env: &[(&str, &str)], want: &str| {
        lsm_test_support::process::rerun_test_with_env(
            "store::tests::the_global_database_follows_the_user_data_folder",
            "XDG_DATA_HOME",
            env,
            WANT,
            want,
        );
    };
    case(
        &[("XDG_DATA_HOME", "/x"), ("HOME", "/h")],
        "/x/lsm/global_memory.db",
    );
    case(&[("HOME", "/h")], "/h/.local/share/lsm/global_memory.db");
    // A relative XDG_DATA_HOME is no base folder (the XDG specification): ignored.
    case(
        &[("XDG_DATA_HOME", "relative"), ("HOME", "/h")],
        "/h/.local/share/lsm/global_memory.db",
    );
}

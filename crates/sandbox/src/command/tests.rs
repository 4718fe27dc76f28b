use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    paths: PathPolicy,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("notes.txt"), "n").unwrap();
    let paths = PathPolicy::new(
        std::slice::from_ref(&root),
        std::slice::from_ref(&root),
        &root,
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        root,
        paths,
    }
}

fn default_policy() -> CommandPolicy {
    CommandPolicy::new(None, &crate::config::default_command_denylist(), false)
}

#[test]
fn parses_plain_command() {
    let f = fixture();
    let cmd = default_policy()
        .check("ls -la 'src' \"notes.txt\"", &f.paths)
        .unwrap();
    assert_eq!(cmd.program, "ls");
    assert_eq!(cmd.args, ["-la", "src", "notes.txt"]);
    assert_eq!(cmd.stdin, None);
    assert_eq!(cmd.stdout, None);
}

#[test]
fn refuses_each_forbidden_token() {
    let f = fixture();
    let policy = default_policy();
    for (line, token) in [
        ("ls; rm x", ";"),
        ("ls && rm x", "&&"),
        ("ls || rm x", "||"),
        ("ls | wc", "|"),
        ("sleep 1 &", "&"),
        ("echo `id`", "`"),
        ("echo $(id)", "$("),
        ("echo ${HOME}", "${"),
        ("echo $HOME", "$"),
        ("echo 'a$'", "$"),
        ("ls\nrm x", "\\n"),
        ("diff <(ls) x", "<("),
        ("tee >(cat)", ">("),
        ("ls &> out", "&>"),
    ] {
        let err = policy.check(line, &f.paths).unwrap_err().to_string();
        assert!(err.contains(&format!("'{token}'")), "{line:?}: {err}");
    }
}

#[test]
fn refuses_bad_syntax() {
    let f = fixture();
    let policy = default_policy();
    for (line, needle) in [
        ("", "empty"),
        ("   ", "empty"),
        ("echo 'unbalanced", "unbalanced"),
        ("echo hi 2> err.txt", "file descriptor"),
        ("echo hi 2>>err.txt", "file descriptor"),
        ("cat << EOF", "here-documents"),
        ("echo hi >", "no target"),
        ("> out.txt", "no program"),
        ("echo a > x > y", "more than one output"),
        ("cat < a < b", "more than one input"),
    ] {
        let err = policy.check(line, &f.paths).unwrap_err().to_string();
        assert!(err.contains(needle), "{line:?}: {err}");
    }
}

#[test]
fn deny_list_is_case_insensitive_on_base_name() {
    let f = fixture();
    let deny = ["RM", "sudo", "python", "sh"].map(String::from);
    let policy = CommandPolicy::new(None, &deny, false);
    for line in [
        "/bin/RM -rf x",
        "rm x",
        "Sudo ls",
        "/usr/bin/python3.12 -c 1",
        "SH -c ls",
    ] {
        let err = policy.check(line, &f.paths).unwrap_err().to_string();
        assert!(err.contains("denylist"), "{line}: {err}");
    }
    assert!(policy.check("ls", &f.paths).is_ok());
    let defaults = default_policy();
    assert!(
        defaults
            .check("BASH -c ls", &f.paths)
            .unwrap_err()
            .to_string()
            .contains("denylist")
    );
}

#[test]
fn allow_list_applies_after_deny_list() {
    let f = fixture();
    let policy = CommandPolicy::new(Some(&["LS".into(), "cat".into()]), &["cat".into()], false);
    assert_eq!(
        policy.check("/bin/ls", &f.paths).unwrap().program,
        "/bin/ls"
    );
    assert!(
        policy
            .check("cat x", &f.paths)
            .unwrap_err()
            .to_string()
            .contains("denylist")
    );
    let err = policy.check("echo x", &f.paths).unwrap_err().to_string();
    assert!(err.contains("not on the command allowlist"), "{err}");
}

#[test]
fn network_programs_refused_without_network_even_with_empty_denylist() {
    let f = fixture();
    let offline = CommandPolicy::new(None, &[], false);
    for prog in NETWORK_PROGRAMS {
        let err = offline
            .check(&format!("{prog} example.com"), &f.paths)
            .unwrap_err()
            .to_string();
        assert!(err.contains("network"), "{prog}: {err}");
    }
    let online = CommandPolicy::new(None, &[], true);
    assert!(online.check("curl example.com", &f.paths).is_ok());
}

#[test]
fn redirections_are_parsed_and_confined() {
    let f = fixture();
    let policy = default_policy();
    let cmd = policy.check("echo hi >out.txt", &f.paths).unwrap();
    assert_eq!(cmd.args, ["hi"]);
    let out = cmd.stdout.unwrap();
    assert_eq!(
        (out.path.shown(), out.append),
        (&*f.root.join("out.txt"), false)
    );
    let cmd = policy.check("echo hi>>log/out.txt more", &f.paths).unwrap();
    assert_eq!(cmd.args, ["hi", "more"]);
    let out = cmd.stdout.unwrap();
    assert_eq!(
        (out.path.shown(), out.append),
        (&*f.root.join("log/out.txt"), true)
    );
    let cmd = policy.check("wc -l < notes.txt", &f.paths).unwrap();
    assert_eq!(cmd.args, ["-l"]);
    assert_eq!(
        cmd.stdin.as_ref().map(ConfinedPath::shown),
        Some(&*f.root.join("notes.txt"))
    );
    let err = policy
        .check("echo hi > /tmp/evil.txt", &f.paths)
        .unwrap_err()
        .to_string();
    assert!(err.contains("redirection target"), "{err}");
    let err = policy
        .check("cat </etc/passwd", &f.paths)
        .unwrap_err()
        .to_string();
    assert!(err.contains("redirection target"), "{err}");
}

#[test]
fn quoted_angle_brackets_are_arguments() {
    let f = fixture();
    let cmd = default_policy()
        .check("grep '<div>' notes.txt", &f.paths)
        .unwrap();
    assert_eq!(cmd.args, ["<div>", "notes.txt"]);
    assert_eq!(cmd.stdout, None);
    let cmd = default_policy().check("echo \"a > b\"", &f.paths).unwrap();
    assert_eq!(cmd.args, ["a > b"]);
}

#[test]
fn comment_hides_the_rest() {
    let f = fixture();
    let cmd = default_policy()
        .check("echo hi # > /etc/x", &f.paths)
        .unwrap();
    assert_eq!(cmd.args, ["hi"]);
    assert_eq!(cmd.stdout, None);
}

#[test]
fn path_arguments_are_checked() {
    let f = fixture();
    let policy = default_policy();
    for line in [
        "cat /etc/passwd",
        "cat ../x",
        "cat src/../../x",
        "grep --file=/etc/passwd x",
        "grep -f/etc/passwd x",
        "tar -xf/etc/passwd",
        "cat ~/secret",
        "cat -- /etc/passwd",
        "grep --file=~/x y",
    ] {
        let err = policy.check(line, &f.paths).unwrap_err().to_string();
        assert!(err.contains("argument"), "{line}: {err}");
    }
    for line in [
        "cat notes.txt",
        "cat ./notes.txt",
        "ls src/",
        "grep -rn foo src",
        "grep --color=never foo",
        "cc -I./src x.c",
        "/usr/bin/ls",
    ] {
        assert!(policy.check(line, &f.paths).is_ok(), "{line}");
    }
}

#[test]
fn writing_programs_need_write_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (docs, ws) = (base.join("docs"), base.join("ws"));
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(docs.join("report.txt"), "r").unwrap();
    // Both folders readable, only ws writable; commands run in docs.
    let paths = PathPolicy::new(
        &[docs.clone(), ws.clone()],
        std::slice::from_ref(&ws),
        &docs,
    )
    .unwrap();
    let policy = default_policy();
    assert!(policy.check("cat report.txt", &paths).is_ok());
    for line in [
        "rm report.txt".to_string(),
        "touch newfile".to_string(),
        "mv report.txt x".to_string(),
        format!("cp report.txt {}", ws.join("copy.txt").display()),
        "sed -i s/r/x/ report.txt".to_string(),
        "find . -delete".to_string(),
        format!("cp -t {} report.txt", ws.display()),
    ] {
        let err = policy.check(&line, &paths).unwrap_err().to_string();
        assert!(
            err.contains("outside the allowed write paths"),
            "{line}: {err}"
        );
    }
    assert!(policy.check("sed -n 1p report.txt", &paths).is_ok());
    let inside = format!("touch {}", ws.join("new.txt").display());
    assert!(policy.check(&inside, &paths).is_ok());
}

#[test]
fn programs_that_run_programs_are_refused() {
    let f = fixture();
    let policy = default_policy();
    for line in [
        "timeout 5 python3 x.py",
        "nice rm x",
        "find . -exec rm {} +",
        "busybox sh",
    ] {
        let err = policy.check(line, &f.paths).unwrap_err().to_string();
        assert!(err.contains("runs"), "{line}: {err}");
    }
    assert!(policy.check("find . -name '*.rs'", &f.paths).is_ok());
}

#[test]
fn relative_program_is_confined_and_made_absolute() {
    let f = fixture();
    let policy = default_policy();
    std::fs::write(f.root.join("tool.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        f.root.join("tool.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cmd = policy.check("./tool.sh arg", &f.paths).unwrap();
    assert_eq!(cmd.program, f.root.join("tool.sh").to_str().unwrap());
    assert!(policy.check("../tool.sh", &f.paths).is_err());
}

#[test]
fn program_link_is_judged_by_its_target() {
    let f = fixture();
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    std::os::unix::fs::symlink(&sh, f.root.join("innocent")).unwrap();
    let policy = CommandPolicy::new(
        None,
        &[sh.file_name().unwrap().to_str().unwrap().into()],
        false,
    );
    let link = f.root.join("innocent");
    let err = policy
        .check(&format!("{} -c id", link.display()), &f.paths)
        .unwrap_err()
        .to_string();
    assert!(err.contains("denylist"), "{err}");
    // Run by a relative path, the link's target is outside the read roots.
    assert!(policy.check("./innocent -c id", &f.paths).is_err());
}

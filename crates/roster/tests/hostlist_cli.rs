//! `roster hostlist` against every offline example of flux-core's
//! t/t2814-hostlist-cmd.t and doc/man1/flux-hostlist.rst, plus the quirks
//! of the Python command (argparse behaviour, re-parsing of hosts, the idset
//! form of `-x`, exit codes).

mod common;

use common::Out;

use std::io::Write;
use std::process::{Command, Stdio};

fn run_with(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roster"));
    cmd.arg("hostlist").args(args);
    cmd.env_remove("FLUX_HOSTLIST_STDIN_TIMEOUT")
        .env_remove("ROSTER_HOSTLIST_STDIN_TIMEOUT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("cannot run roster: {e}"),
    };
    if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
        let _ = w.write_all(text.as_bytes());
    }
    match child.wait_with_output() {
        Ok(o) => o.into(),
        Err(e) => panic!("roster hostlist failed to run: {e}"),
    }
}

fn run(args: &[&str]) -> Out {
    run_with(args, None, &[])
}

/// Successful run: stdout with the trailing newline removed (like `$(...)`).
#[track_caller]
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.code, 0, "{args:?} failed: {}", o.stderr);
    assert_eq!(o.stderr, "", "{args:?}");
    o.stdout.strip_suffix('\n').unwrap_or(&o.stdout).to_string()
}

/// Failing run: exit code 1, an error line on stderr, nothing on stdout.
#[track_caller]
fn fails(args: &[&str]) -> String {
    failure(args, 1, "roster-hostlist: ERROR: ")
}

/// argparse error: exit code 2, usage and message on stderr.
#[track_caller]
fn usage_error(args: &[&str]) -> String {
    failure(args, 2, "usage: roster hostlist ")
}

/// A run that exits `code`, prints nothing on stdout and `prefix...` on
/// stderr: its stderr.
#[track_caller]
fn failure(args: &[&str], code: i32, prefix: &str) -> String {
    let o = run(args);
    let Out { stdout, stderr, .. } = &o;
    assert_eq!(o.code, code, "{args:?}: stdout {stdout:?}, stderr {stderr}");
    assert_eq!(o.stdout, "", "{args:?}");
    assert!(o.stderr.starts_with(prefix), "{args:?}: {stderr}");
    o.stderr
}

// ------------------------------------------------------------------ t2814

#[test]
fn t2814_help() {
    let o = run(&["--help"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("SOURCES may include"));
    assert!(o.stdout.starts_with("usage: roster hostlist "));
}

#[test]
fn t2814_instance_sources_need_an_instance() {
    for args in [
        &["-l"][..],
        &["--count", "local"],
        &["instance"],
        &["--count", "avail"],
        &["available"],
        &["local", "foo1"],
    ] {
        let e = fails(args);
        assert!(e.contains("needs a running Flux/Roster instance"), "{e}");
    }
    let e = run_with(&["local"], None, &[("FLUX_JOB_ID", "f1")]);
    assert_eq!(e.code, 1);
}

#[test]
fn t2814_reads_stdin_by_default() {
    let o = run_with(&[], Some("foo[0-3]\n"), &[]);
    assert_eq!((o.stdout.as_str(), o.code), ("foo[0-3]\n", 0));
}

#[test]
fn t2814_stdin_timeout() {
    // stdin held open by this process but never written: the read must time out.
    let mut child = match Command::new(env!("CARGO_BIN_EXE_roster"))
        .arg("hostlist")
        .env("FLUX_HOSTLIST_STDIN_TIMEOUT", "0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("spawn: {e}"),
    };
    let keep = child.stdin.take();
    let out = child.wait_with_output();
    drop(keep);
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("wait: {e}"),
    };
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "roster-hostlist: ERROR: timeout after 0.1s waiting for stdin\n"
    );
}

#[test]
fn t2814_jobid_and_fallback() {
    let e = fails(&["foo1"]);
    assert!(e.contains("job foo1 not found"), "{e}");
    assert_eq!(ok(&["--fallback", "foo1"]), "foo1");
    assert_eq!(ok(&["--fallback", "foo1", "foo2", "foo3"]), "foo[1-3]");
    // man page: --fallback example
    assert_eq!(ok(&["--fallback", "foo1", "foo2"]), "foo[1-2]");
    assert_eq!(ok(&["-f", "fuzzy"]), "fuzzy");
    assert!(fails(&["f1"]).contains("job f1 not found"));
    assert!(fails(&["12345"]).contains("job 12345 not found"));
}

#[test]
fn t2814_count() {
    assert_eq!(ok(&["-c", "foo[1-10]"]), "10");
}

#[test]
fn t2814_stdin() {
    for input in ["foo1 foo2 foo3", "foo1\nfoo2\nfoo3"] {
        let o = run_with(&[], Some(input), &[]);
        assert_eq!((o.stdout.as_str(), o.code), ("foo[1-3]\n", 0), "{input:?}");
    }
}

#[test]
fn t2814_hostlist_args() {
    assert_eq!(ok(&["foo[1-3]"]), "foo[1-3]");
    assert_eq!(ok(&["--fallback", "foo1", "foo2", "foo3"]), "foo[1-3]");
}

#[test]
fn t2814_rejects_invalid_hostlist() {
    assert_eq!(
        fails(&["foo[1-"]),
        "roster-hostlist: ERROR: Invalid jobid or hostlist foo[1-\n"
    );
}

#[test]
fn t2814_quiet() {
    let o = run(&["--quiet", "foo[1-10]"]);
    assert_eq!((o.stdout.as_str(), o.code), ("", 0));
    let o = run(&["--quiet", "--intersect", "host1", "host2"]);
    assert_eq!((o.stdout.as_str(), o.stderr.as_str(), o.code), ("", "", 1));
    let o = run(&["--quiet", "host[1-10]"]);
    assert_eq!((o.stdout.as_str(), o.code), ("", 0));
}

#[test]
fn t2814_expand() {
    assert_eq!(ok(&["-e", "foo[1-3]"]), "foo1 foo2 foo3");
    let o = run(&["--expand", "--delimiter=\\n", "foo[1-3]"]);
    assert_eq!((o.stdout.as_str(), o.code), ("foo1\nfoo2\nfoo3\n", 0));
}

#[test]
fn t2814_nth() {
    assert_eq!(ok(&["--nth=1", "foo[1-10]"]), "foo2");
    assert_eq!(ok(&["--nth=-1", "foo[1-10]"]), "foo10");
    assert_eq!(ok(&["--nth=1,3-4", "foo[1-10]"]), "foo[2,4-5]");
    assert_eq!(ok(&["--nth=-1,3-4", "foo[1-10]"]), "foo[7-8,10]");
    assert_eq!(ok(&["-e", "--nth=1,3-4", "foo[1-10]"]), "foo2 foo4 foo5");
    assert_eq!(
        fails(&["-n", "10", "foo[1-10]"]),
        "roster-hostlist: ERROR: Hostlist index out of range\n"
    );
    fails(&["-n", "1,10", "foo[1-10]"]);
}

#[test]
fn t2814_find() {
    assert_eq!(ok(&["-F", "foo1", "foo[1-10]"]), "0");
    assert_eq!(ok(&["-F", "foo10", "foo[1-10]"]), "9");
    assert_eq!(ok(&["-F", "foo[1-2]", "foo[1-10]"]), "0 1");
    for find in ["foo1", "foo[1-10]"] {
        assert_eq!(
            fails(&["-F", find, "foo[2-10]"]),
            "roster-hostlist: ERROR: host 'foo1' not found\n",
            "{find}"
        );
    }
}

#[test]
fn t2814_exclude() {
    assert_eq!(ok(&["-x", "foo1", "foo[0-10]"]), "foo[0,2-10]");
    assert_eq!(ok(&["-x", "foo[0-9]", "foo[0-10]"]), "foo10");
    assert_eq!(ok(&["-x", "1", "foo[0-10]"]), "foo[0,2-10]");
    assert_eq!(ok(&["-x", "0-9", "foo[0-10]"]), "foo10");
    assert_eq!(ok(&["-x", "foo5", "-n", "5-6", "foo[1-10]"]), "foo[7-8]");
}

#[test]
fn t2814_limit() {
    assert_eq!(ok(&["-L", "2", "foo[1-10]"]), "foo[1-2]");
    assert_eq!(ok(&["-L", "-2", "foo[1-10]"]), "foo[9-10]");
}

#[test]
fn t2814_order_and_duplicates() {
    assert_eq!(ok(&["host1", "host0", "host5", "host4"]), "host[1,0,5,4]");
    assert_eq!(ok(&["host1", "host1", "host1"]), "host[1,1,1]");
}

#[test]
fn t2814_sort() {
    assert_eq!(ok(&["-S", "host3", "host2", "host1", "host0"]), "host[0-3]");
    assert_eq!(
        ok(&["-S", "host2", "host1", "host3", "host1"]),
        "host[1,1-3]"
    );
}

#[test]
fn t2814_union() {
    assert_eq!(ok(&["-u", "host2", "host1", "host3", "host1"]), "host[1-3]");
    assert_eq!(ok(&["-u", "host[1-3]", "host2"]), "host[1-3]");
    assert_eq!(ok(&["-u", "host[1-3]", "bar", "baz"]), "bar,baz,host[1-3]");
}

#[test]
fn t2814_intersect() {
    assert_eq!(ok(&["-i", "host[1-3]", "host[2-5]"]), "host[2-3]");
    assert_eq!(ok(&["-i", "host[1-3]", "host[2-5]", "host[3-10]"]), "host3");
}

#[test]
fn t2814_xor() {
    assert_eq!(ok(&["-X", "host[1-3]", "host[2-5]"]), "host[1,4-5]");
    assert_eq!(
        ok(&["-X", "host[1-3]", "host[2-5]", "host[3-10]"]),
        "host[1,3,6-10]"
    );
    assert_eq!(
        ok(&["-X", "host[3-10]", "host[1-3]", "host[2-5]"]),
        "host[1,3,6-10]"
    );
}

#[test]
fn t2814_minus() {
    assert_eq!(ok(&["-m", "host[1-10]", "host[2-3]"]), "host[1,4-10]");
    assert_eq!(
        ok(&["-m", "host[1-10]", "host[2-3]", "host[5-10]"]),
        "host[1,4]"
    );
    assert_eq!(ok(&["-m", "host[1-10]", "host[1-20]"]), "");
    let o = run(&["-qm", "host[1-10]", "host[1-20]"]);
    assert_eq!((o.stdout.as_str(), o.code), ("", 1));
    assert_eq!(ok(&["-m", "host[1,1,1]", "host1"]), "host[1,1]");
    assert_eq!(ok(&["-um", "host[1,1,1]", "host1"]), "host1");
}

// ------------------------------------------------------------------ man page

#[test]
fn man_page_examples() {
    // -F/--find
    assert_eq!(ok(&["-F", "foo[1-2]", "foo[1-10]"]), "0 1");
    assert_eq!(
        fails(&["-F", "foo[1-2],bar", "foo[1-10]"]),
        "roster-hostlist: ERROR: host 'bar' not found\n"
    );
    assert_eq!(
        fails(&["-F", "bar,baz,foo11", "foo[1-10]"]),
        "roster-hostlist: ERROR: hosts 'bar,baz,foo11' not found\n"
    );
    // -led'\n' and -le need the local source
    assert!(fails(&["-led\\n"]).contains("'local'"));
    assert!(fails(&["-le"]).contains("'local'"));
    // host1 was part of the list?
    assert_eq!(run(&["-q", "-i", "host[0-3]", "host1"]).code, 0);
    assert_eq!(run(&["-q", "-i", "host[0-3]", "host9"]).code, 1);
    // JOBID examples need an instance
    assert!(fails(&["-x", "0", "f2BdJfZ5"]).contains("job f2BdJfZ5 not found"));
    assert!(fails(&["--minus", "instance", "host0"]).contains("'instance'"));
    // exit status 2: invalid option
    usage_error(&["--bogus", "x"]);
}

// ------------------------------------------------------------------ argparse behaviour

#[test]
fn argparse_behaviour() {
    let e = usage_error(&["-n", "-1,3-4", "foo[1-10]"]);
    assert!(
        e.ends_with("roster hostlist: error: argument -n/--nth: expected one argument\n"),
        "{e}"
    );
    assert_eq!(ok(&["-n", "-1", "foo[1-10]"]), "foo10");
    assert_eq!(ok(&["-n-2", "foo[1-10]"]), "foo9");
    assert_eq!(ok(&["--nt=0", "foo[1-10]"]), "foo1");
    assert_eq!(ok(&["foo[1-10]", "--nth", "3"]), "foo4");
    assert_eq!(ok(&["-ed,", "foo[1-3]"]), "foo1,foo2,foo3");
    assert_eq!(ok(&["-e", "-d", "", "foo[1-3]"]), "foo1foo2foo3");
    assert_eq!(ok(&["-e", "-d", "\\t", "foo[1-2]"]), "foo1\\tfoo2");
    assert_eq!(ok(&["--", "foo[1-2]"]), "foo[1-2]");
    let e = usage_error(&["-e", "-c", "foo"]);
    assert!(e.contains("argument -c/--count: not allowed with argument -e/--expand"));
    let e = usage_error(&["-m", "-i", "foo"]);
    assert!(e.contains("argument -i/--intersect: not allowed with argument -m/--minus"));
    let e = usage_error(&["a", "-S", "b"]);
    assert!(e.contains("unrecognized arguments: b"), "{e}");
    let e = usage_error(&["-L", "two", "a"]);
    assert!(e.contains("argument -L/--limit: invalid int value: 'two'"));
    let e = usage_error(&["-x", "foo[", "a"]);
    assert!(e.contains("argument -x/--exclude: invalid Hostlist value: 'foo['"));
    let e = usage_error(&["--u", "a"]);
    assert!(e.contains("ambiguous option: --u could match --union, --unique"));
    let e = usage_error(&["--uni", "a"]);
    assert!(e.contains("ambiguous option: --uni could match --union, --unique"));
    assert_eq!(ok(&["--uniq", "a", "a"]), "a");
    assert_eq!(ok(&["--unio", "b", "a"]), "a,b");
}

// ------------------------------------------------------------------ quirks of the Python command

#[test]
fn nth_quirks() {
    // -0 is index 0, i.e. the first host
    assert_eq!(ok(&["--nth=-0", "foo[1-10]"]), "foo1");
    assert_eq!(ok(&["--nth=-10", "foo[1-10]"]), "foo1");
    fails(&["--nth=-11", "foo[1-10]"]);
    // empty idsets select nothing
    assert_eq!(ok(&["--nth=", "foo[1-10]"]), "");
    assert_eq!(ok(&["-n", "-", "foo[1-10]"]), "");
    assert_eq!(
        fails(&["-n", "x", "foo[1-10]"]),
        "roster-hostlist: ERROR: IDset(): Invalid argument: x\n"
    );
    assert_eq!(
        fails(&["-n", "3,1", "foo[1-10]"]),
        "roster-hostlist: ERROR: IDset(): Invalid argument: 3,1\n"
    );
    // hosts are re-parsed when appended: a literal "[2]" suffix expands
    assert_eq!(ok(&["a[1]b[2]"]), "a1b[2]");
    assert_eq!(ok(&["-n", "0", "a[1]b[2]"]), "a1b2");
    // -q with an invalid index still reports the error
    fails(&["-q", "-n", "5", "a"]);
}

#[test]
fn exclude_quirks() {
    // every occurrence is removed
    assert_eq!(ok(&["-x", "foo1", "foo[1,1,2,1]"]), "foo2");
    // hosts win over indices
    assert_eq!(ok(&["-x", "1", "[0-3]"]), "[0,2-3]");
    // the idset is built from the sorted host strings: 5,10 sorts as "10,5"
    assert_eq!(ok(&["-x", "5,10", "foo[0-12]"]), "foo[0-12]");
    assert_eq!(ok(&["-x", "1,3", "foo[0-4]"]), "foo[0,2,4]");
    assert_eq!(ok(&["-x", "[0-10]", "foo[0-11]"]), "foo[0-11]");
    assert_eq!(ok(&["-x", "3,1", "foo[0-4]"]), "foo[0,2,4]");
    // neither hosts nor an idset: unchanged
    assert_eq!(ok(&["-x", "bar", "foo[0-4]"]), "foo[0-4]");
    // an empty exclude list is ignored
    assert_eq!(ok(&["-x", "", "foo[0-4]"]), "foo[0-4]");
    // out of range indices are not an error
    assert_eq!(ok(&["-x", "3-100", "foo[0-4]"]), "foo[0-2]");
}

#[test]
fn limit_quirks() {
    assert_eq!(ok(&["-L", "0", "foo[1-10]"]), "foo[1-10]");
    assert_eq!(ok(&["-L", "100", "foo[1-3]"]), "foo[1-3]");
    assert_eq!(ok(&["-L", "-100", "foo[1-3]"]), "foo[1-3]");
    assert_eq!(ok(&["-L", "1", "-S", "foo[3,1,2]"]), "foo1");
    // slices re-parse hosts and so merge them again
    assert_eq!(ok(&["-L", "3", "node1", "node2", "node3"]), "node[1-3]");
}

#[test]
fn output_quirks() {
    // empty results print nothing, even with -e, but -c prints 0
    assert_eq!(run(&["-m", "a", "a"]).stdout, "");
    assert_eq!(run(&["-e", "-m", "a", "a"]).stdout, "");
    assert_eq!(ok(&["-c", "-m", "a", "a"]), "0");
    let o = run(&["-q", "-c", "-m", "a", "a"]);
    assert_eq!((o.stdout.as_str(), o.code), ("", 1));
    // -F prints indices even for an empty HOSTS list (a non-empty string:
    // `if args.find:` ignores -F '' altogether)
    assert_eq!(run(&["-F", ",", "a"]).stdout, "\n");
    assert_eq!(run(&["-F", "", "a"]).stdout, "a\n");
    // -F takes precedence over -c/-e
    assert_eq!(ok(&["-c", "-F", "b", "a,b"]), "1");
    // duplicate hosts report the first index
    assert_eq!(ok(&["-F", "a,a", "b,a,a"]), "1 1");
    // width-aware find
    assert_eq!(ok(&["-F", "f007", "f00[7-8]"]), "0");
    fails(&["-F", "i00", "i[0-5]"]);
}

#[test]
fn decode_quirks_through_the_cli() {
    assert_eq!(ok(&["node9", "node10"]), "node[9-10]");
    assert_eq!(ok(&["-f", "foo9", "foo10"]), "foo[9-10]");
    assert_eq!(ok(&["n8", "n09"]), "n[8,09]");
    assert_eq!(ok(&["foo[1,3]-bar"]), "foo1-bar,foo3-bar");
    assert_eq!(ok(&["1,2,3,4,5,9"]), "[1-5,9]");
    assert_eq!(ok(&["foo[ 1]"]), "foo01");
    assert_eq!(ok(&["-S", "[0-20],12,15"]), "[0-12,12-15,15-20]");
    assert_eq!(ok(&["-u", "[0-20],45,12,015"]), "[0-20,45,015]");
    // a bare host whose number overflows 64 bits vanishes, as in flux-core
    assert_eq!(run(&["foo99999999999999999999"]).stdout, "");
    fails(&["foo[0-1048576]"]);
}

#[test]
fn stdin_quirks() {
    // lines are appended (and merge); blank lines are ignored; CR/LF handled
    let o = run_with(&["-"], Some("a1\r\na2\n\n a3 \n"), &[]);
    assert_eq!((o.stdout.as_str(), o.code), ("a[1-3]\n", 0));
    // a second stdin source reads nothing
    let o = run_with(&["-", "stdin", "b"], Some("a\n"), &[]);
    assert_eq!(o.stdout, "a,b\n");
    // invalid lines
    let o = run_with(&[], Some("ok1\nfoo[\n"), &[]);
    assert_eq!(
        (o.stderr.as_str(), o.code),
        ("roster-hostlist: ERROR: Invalid hostlist: 'foo['\n", 1)
    );
    let o = run_with(&[], Some(""), &[("FLUX_HOSTLIST_STDIN_TIMEOUT", "nope")]);
    assert_eq!(
        (o.stderr.as_str(), o.code),
        (
            "roster-hostlist: ERROR: could not convert string to float: 'nope'\n",
            1
        )
    );
    // /dev/null is readable at once and empty
    let o = run(&["-c"]);
    assert_eq!((o.stdout.as_str(), o.code), ("0\n", 0));
    // input already there is read even with a zero timeout
    let path = std::env::temp_dir().join(format!("roster-hostlist-{}.txt", std::process::id()));
    assert!(std::fs::write(&path, "h1\nh2\n").is_ok());
    let file = std::fs::File::open(&path).ok();
    let out = Command::new(env!("CARGO_BIN_EXE_roster"))
        .arg("hostlist")
        .env("FLUX_HOSTLIST_STDIN_TIMEOUT", "0")
        .stdin(file.map_or_else(Stdio::null, Stdio::from))
        .output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("run: {e}"),
    };
    assert_eq!(String::from_utf8_lossy(&out.stdout), "h[1-2]\n");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn set_operations_with_padding_and_suffixes() {
    assert_eq!(ok(&["-i", "n[01-10]", "n[5-15]"]), "n10");
    assert_eq!(ok(&["-X", "a[1-3]-ib", "a[2-4]-ib"]), "a1-ib,a4-ib");
    assert_eq!(ok(&["-m", "a[1-3]-ib", "a2-ib"]), "a1-ib,a3-ib");
    assert_eq!(ok(&["-u", "b,a,b,a"]), "a,b");
    assert_eq!(ok(&["-i", "a,b,a", "a"]), "a");
    // -i with a single source does not uniq
    assert_eq!(ok(&["-i", "a,a"]), "a,a");
}

/// Errors raised by flux's Python wrapper for a failing libhostlist call are
/// `OSError(errno, "<ERRNO NAME>: <strerror>")`, and `CLIMain` prints the
/// `strerror` part, so the symbolic errno name leads the message.
#[test]
fn wrapper_errors_name_the_errno() {
    for args in [
        // `host in hl` (via -i/-X) with a name hostlist_find() rejects
        ["-X", "h[1-2][3-4]", "h5"],
        ["-i", "h[1,2]x[3]", "h5"],
        // -F with such a name
        ["-F", "h[1,2]x[3]", "h1"],
    ] {
        let o = run(&args);
        assert_eq!(
            (o.stderr.as_str(), o.code),
            ("roster-hostlist: ERROR: EINVAL: Invalid argument\n", 1),
            "{args:?}"
        );
    }
}

/// Python's `sys.stdin` splits lines at "\n" only on POSIX (no universal
/// newlines): a lone "\r" stays inside the line, and `rstrip()` removes it
/// only at the end of a line.
#[test]
fn stdin_splits_lines_at_newline_only() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&[], "h1\rh2\n", "h1\rh2\n"),
        (&[], "a\rb\nc", "a\rb,c\n"),
        (&["-c"], "h1\r\n\rh2\n", "2\n"),
        // a trailing "\r" is white space to rstrip()
        (&[], "h1\r\nh2\r\n", "h[1-2]\n"),
    ];
    for &(args, stdin, stdout) in cases {
        let o = run_with(args, Some(stdin), &[]);
        assert_eq!((o.stdout.as_str(), o.code), (stdout, 0), "{stdin:?}");
    }
}

/// flux-hostlist.py tests `if args.find:`, so an empty `-F` argument is
/// ignored and the hostlist is printed as usual.
#[test]
fn empty_find_argument_is_ignored() {
    assert_eq!(ok(&["-F", "", "h[1-5]"]), "h[1-5]");
    assert_eq!(ok(&["--find=", "-c", "h[1-5]"]), "5");
}

/// Clustered short options follow argparse's consume_optional() as in the
/// Python releases whose "--" handling we already follow (3.13+): an
/// unknown letter makes the rest of the word an unrecognized argument, an
/// `=` or `-` after a flag is an ignored explicit argument, `=` separates a
/// clustered option from its value, and the word's actions are taken only
/// after the whole word is parsed.
#[test]
fn clustered_short_options() {
    let cases: &[(&[&str], &str)] = &[
        (&["-eZ", "h3"], "error: unrecognized arguments: -Z\n"),
        (&["-eZS", "h3"], "error: unrecognized arguments: -ZS\n"),
        (
            &["-e=S", "h1"],
            "error: argument -e/--expand: ignored explicit argument 'S'\n",
        ),
        (
            &["-c", "-e-x", "h1"],
            "error: argument -e/--expand: ignored explicit argument '-x'\n",
        ),
        (
            &["-c", "-en"],
            "error: argument -n/--nth: expected one argument\n",
        ),
        (
            &["-Sc", "-eZ", "h3"],
            "error: argument -e/--expand: not allowed with argument -c/--count\n",
        ),
    ];
    for &(args, ending) in cases {
        let e = usage_error(args);
        assert!(e.ends_with(ending), "{args:?}: {e}");
    }
    assert_eq!(ok(&["-ed=,", "h[1-2]"]), "h1,h2");
}

/// `--` as an option value is kept (CPython 3.11's argparse drops it and
/// flux-hostlist then fails; later releases, and Roster, print with it).
#[test]
fn double_dash_as_delimiter() {
    assert_eq!(ok(&["-e", "--delimiter=--", "a", "b"]), "a--b");
    assert_eq!(ok(&["-e", "-d", "--", "x", "a", "b"]), "axb");
}

/// flux-core's decoder takes the first `]` after `[` as the end of the
/// range and keeps the rest as a suffix, so a trailing `]` after a range is
/// accepted (`n[1-2]]` is `n1],n2]`); a `]` with no `[` in its token is an
/// unmatched bracket (EINVAL), as in `hostlist_create_bracketed()`.
#[test]
fn trailing_bracket_after_a_range() {
    assert_eq!(ok(&["n[1-2]]"]), "n1],n2]");
    assert_eq!(ok(&["-e", "n[1-2]]x"]), "n1]x n2]x");
    assert_eq!(ok(&["-c", "n[1-2]]", "n[3]]]"]), "3");
    assert_eq!(
        fails(&["n1]"]),
        "roster-hostlist: ERROR: Invalid jobid or hostlist n1]\n"
    );
}

/// `roster hostlist -e ... | head` (and the other offline tools) end
/// quietly when the reader goes away: killed by SIGPIPE as flux's tools
/// are, nothing on stderr.
#[test]
fn offline_tools_end_quietly_on_a_closed_pipe() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["hostlist", "-e", "n[1-500000]"][..],
        &["idset", "expand", "0-2000000"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_roster"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        out.read_exact(&mut first).unwrap();
        drop(out); // like `head` once it has its lines
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {status:?} {err}"
        );
        assert_eq!(err, "", "{args:?}");
    }
}

/// `--exclude` by index rebuilds the list from its hosts; when one of them
/// does not decode on its own (`n1]`), flux-hostlist catches the
/// ValueError and prints the list unaltered (issue 26, item 8).
#[test]
fn exclude_by_index_keeps_a_list_whose_hosts_do_not_decode_alone() {
    for (hosts, want) in [
        (
            "cn[62-63,68-69,71-72,75-78],n[1-2]]",
            "r12u182,login,login,cn[62-63,68-69,71-72,75-78],n1],n2]",
        ),
        // without such a host, the indices are excluded
        (
            "cn[62-63,68-69,71-72,75-78]",
            "r12u182,login,login,cn[62-63,72,75-78]",
        ),
    ] {
        let args = ["--exclude=5-7", "r12u182,login,login", hosts];
        assert_eq!(ok(&args), want, "{hosts}");
    }
}

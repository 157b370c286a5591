//! `roster R` against flux-core's t0026-flux-R.t and the reference notes.

mod common;

use common::{run_stdin, Out};

fn run(args: &[&str], stdin: &str) -> Out {
    run_stdin(&[&["R"][..], args].concat(), stdin)
}

/// Run and require success; returns stdout.
fn ok(args: &[&str], stdin: &str) -> String {
    let o = run(args, stdin);
    assert_eq!(o.code, 0, "roster R {args:?} failed: {}", o.stderr);
    o.stdout
}

fn encode(args: &[&str]) -> String {
    ok(&[&["encode"], args].concat(), "")
}

fn line(s: String) -> String {
    s.trim_end_matches('\n').to_string()
}

fn decode(args: &[&str], r: &str) -> String {
    line(ok(&[&["decode"], args].concat(), r))
}

#[test]
fn fails_on_invalid_r() {
    assert_eq!(run(&["decode"], "{\"version\": 1}\n").code, 1);
    for (r, why) in [
        (
            "",
            "Failed to read an R object: '[' or '{' expected near end of file",
        ),
        ("{}\n", "Failed to decode R on stdin: Object item not found: version"),
        (
            "{\"version\": 1, \"execution\": {}}\n",
            "Failed to decode R on stdin: Object item not found: R_lite",
        ),
        (
            "bad json\n",
            "Failed to read an R object: '[' or '{' expected near 'bad'",
        ),
        (
            r#"{"version": 2, "execution": {"R_lite": []}}"#,
            "Failed to decode R on stdin: invalid version=2",
        ),
        // Errors flux reports without text: Roster names the key and value.
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "x", "children": {}}]}}"#,
            "Failed to decode R on stdin: invalid R_lite rank idset 'x'",
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "x-y"}}]}}"#,
            r#"Failed to decode R on stdin: rank 0: invalid core idset "x-y""#,
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], "nodelist": ["a"]}}"#,
            "Failed to decode R on stdin: nodelist has 1 hosts but R has 2 nodes",
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-3"}}, {"rank": "0", "children": {"core": "2-5"}}]}}"#,
            "Failed to decode R on stdin: rank 0: core ids 2-3 given twice",
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "nodelist": ["a["]}}"#,
            "Failed to decode R on stdin: execution.nodelist: invalid hostlist 'a[': unmatched bracket",
        ),
    ] {
        let o = run(&["decode"], r);
        assert_eq!((o.code, o.stderr), (1, format!("roster R: {why}\n")), "{r}");
    }
}

/// RFC 20's MUSTs that flux-core does not check are refused with the
/// key, the value and the RFC's sentence (issue 26, items 2 and 3).
#[test]
fn rfc20_musts_are_enforced() {
    let cases = [
        (
            r#"{"version": 1, "execution": {"R_lite": {}}}"#,
            r#"R execution.R_lite={}: RFC 20: "R_lite is a strict list of dictionaries""#,
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [], "starttime": 20, "expiration": 10}}"#,
            r#"R execution.expiration=10: RFC 20: "If starttime is also set, expiration MUST be greater than starttime.""#,
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [], "starttime": 20, "expiration": 20}}"#,
            r#"R execution.expiration=20: RFC 20: "If starttime is also set, expiration MUST be greater than starttime.""#,
        ),
        (
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "properties": {"x!y": "0"}}}"#,
            r#"invalid character '!' in property "x!y""#,
        ),
    ];
    for (r, why) in cases {
        for cmd in ["decode", "remap"] {
            let o = run(&[cmd], r);
            assert_eq!(
                (o.code, o.stderr),
                (1, format!("roster R: Failed to decode R on stdin: {why}\n")),
                "{cmd} {r}"
            );
        }
    }
    // `R set-property` refuses the name too
    let o = run(&["set-property", "x!y:0"], &encode(&[]));
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "roster R: failed to assign properties: invalid character '!' in property \"x!y\"\n"
        )
    );
    // an empty R_lite array and unset (0) times are fine
    let r = ok(
        &["decode"],
        r#"{"version": 1, "execution": {"R_lite": [], "starttime": 0, "expiration": 0}}"#,
    );
    assert!(r.contains(r#""R_lite": []"#), "{r}");
}

#[test]
fn empty_r_lite() {
    let r = ok(
        &["decode"],
        r#"{"version": 1, "execution": {"R_lite": []}}"#,
    );
    assert_eq!(
        r,
        "{\"version\": 1, \"execution\": {\"R_lite\": [], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": [\"\"]}}\n"
    );
    assert_eq!(decode(&["--count", "core"], &r), "0");
}

#[test]
fn encode_defaults() {
    let r = encode(&[]);
    assert!(r.starts_with(
        "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0\", \"children\": {\"core\": \"0\"}}], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": [\""
    ));
    assert_eq!(decode(&["--count", "node"], &r), "1");
    assert_eq!(decode(&["--count", "core"], &r), "1");
    assert_eq!(decode(&["--count", "gpu"], &r), "0");
    assert_eq!(decode(&["--short"], &r), "rank0/core0");
}

#[test]
fn encode_ranks_cores_gpus_hosts() {
    assert_eq!(
        decode(&["--count", "node"], &encode(&["--ranks", "0-1"])),
        "2"
    );
    let r = encode(&["--ranks", "0,2"]);
    assert_eq!(decode(&["--count", "node"], &r), "2");
    assert_eq!(decode(&["--count", "core"], &r), "2");
    assert_eq!(decode(&["--ranks"], &r), "0,2");
    assert_eq!(
        decode(&["--count", "node"], &encode(&["--cores", "0-1"])),
        "1"
    );
    assert_eq!(
        decode(&["--count", "core"], &encode(&["--cores", "0-1"])),
        "2"
    );
    assert_eq!(
        decode(&["-c", "core"], &encode(&["-c", "0-1", "-r", "0-1"])),
        "4"
    );
    let g = encode(&["--gpus", "0"]);
    assert_eq!(decode(&["--count", "node"], &g), "1");
    assert_eq!(decode(&["--count", "gpu"], &g), "1");
    assert_eq!(decode(&["--count", "core"], &g), "0");
    let cg = encode(&["--cores", "0-1", "-g", "0"]);
    assert_eq!(decode(&["--count", "core"], &cg), "2");
    assert_eq!(decode(&["--count", "gpu"], &cg), "1");
    let h = encode(&["--hosts=foo[0-1]"]);
    assert_eq!(decode(&["-c", "node"], &h), "2");
    assert_eq!(decode(&["--nodelist"], &h), "foo[0-1]");
    assert_eq!(
        line(encode(&[
            "-r", "0-3", "-c", "0-3", "-g", "0", "-H", "foo[0-3]"
        ])),
        r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-3", "children": {"gpu": "0", "core": "0-3"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["foo[0-3]"]}}"#
    );
    assert_eq!(
        decode(
            &["--short"],
            &encode(&["-r", "0-3", "-c", "0-7", "-H", "n[0-3]"])
        ),
        "rank[0-3]/core[0-7]"
    );
}

#[test]
fn encode_errors() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["-r", "0-3", "-H", "foo[0-1]"],
            "hostname count in 'foo[0-1]' does not match nranks (4)",
        ),
        (&["-r", "x"], "Failed to decode ranks='x' as idset"),
        (&["-H", "foo["], "invalid hostlist 'foo['"),
        (
            &["-c", "0-1", "--local"],
            "do not specify --cores or --gpus with --local or --xml",
        ),
        (&["-c", "x"], "rlist_append rank=0: Invalid argument"),
    ];
    for &(args, why) in cases {
        let o = run(&[&["encode"], args].concat(), "");
        let want = format!("roster R: {why}\n");
        assert_eq!((o.code, o.stderr), (1, want), "{args:?}");
    }
    let o = run(&["encode", "--bogus"], "");
    assert_eq!(o.code, 1);
    let usage = "roster R encode: unrecognized option '--bogus'\n";
    assert!(o.stderr.starts_with(usage), "{}", o.stderr);
}

#[test]
fn encode_decode_properties() {
    let p = encode(&[
        "--hosts=foo[0-1]",
        "--gpus",
        "0",
        "--cores",
        "0-1",
        "--property",
        "xx:0",
        "--property",
        "yy:1",
        "--property",
        "all",
    ]);
    assert_eq!(
        line(p.clone()),
        r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"gpu": "0", "core": "0-1"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["foo[0-1]"], "properties": {"yy": "1", "all": "0-1", "xx": "0"}}}"#
    );
    check_property_filters(&p);
    let o = run(&["encode", "-r", "0-3", "-p", "xx:3-5"], "");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster R: failed to assign properties: ranks 4-5 not found in target resource list\n"
    );
}

fn check_property_filters(p: &str) {
    assert_eq!(decode(&["-c", "node"], p), "2");
    assert_eq!(decode(&["-c", "node", "--properties", "all"], p), "2");
    assert_eq!(decode(&["-c", "node", "--properties", "xx"], p), "1");
    assert_eq!(decode(&["-c", "node", "--properties", "yy"], p), "1");
    assert_eq!(decode(&["-c", "node", "--properties", "^all"], p), "0");
    assert_eq!(decode(&["-c", "node", "--properties", "all,yy"], p), "1");
    assert_eq!(decode(&["--nodelist", "--properties", "xx"], p), "foo0");
    assert_eq!(decode(&["--nodelist", "--properties", "yy"], p), "foo1");
    assert_eq!(decode(&["--nodelist", "--properties", "^yy"], p), "foo0");
    // A property also matches the hostname.
    assert_eq!(decode(&["--ranks", "--properties", "foo1"], p), "1");
    let o = run(&["decode", "-p", "a|b"], p);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster R: Invalid property constraint: invalid character '|' in property \"a|b\": Invalid argument\n"
    );
}

#[test]
fn set_property() {
    let r = encode(&["-r", "0-1", "-c", "0-3", "-H", "foo[0-1]"]);
    let r = ok(&["set-property", "all"], &r);
    let p = ok(&["set-property", "xx:0", "yy:1"], &r);
    check_property_filters(&p);
    let o = run(&["set-property", "foo:1-2"], &encode(&["-r", "0-1"]));
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster R: failed to assign properties: rank 2 not found in target resource list\n"
    );
}

#[test]
fn decode_include_exclude() {
    assert_eq!(
        decode(&["--include", "5-7", "--short"], &encode(&["-r", "0-1023"])),
        "rank[5-7]/core0"
    );
    assert_eq!(
        decode(&["--exclude", "5-7", "--short"], &encode(&["-r", "1-10"])),
        "rank[1-4,8-10]/core0"
    );
    // flux's core tally is not reduced by --exclude.
    assert_eq!(
        decode(
            &["--exclude", "5-7", "-c", "core"],
            &encode(&["-r", "1-10"])
        ),
        "10"
    );
    assert_eq!(
        decode(
            &["--exclude", "5-7", "-c", "node"],
            &encode(&["-r", "1-10"])
        ),
        "7"
    );
    // Output options print in the order short, nodelist, ranks, count.
    let r = encode(&["-r", "0-3", "-H", "foo[0-3]"]);
    assert_eq!(
        decode(&["-c", "node", "-r", "-n", "-s"], &r),
        "rank[0-3]/core0\nfoo[0-3]\n0-3\n4"
    );
    let o = run(&["decode", "--include", "x"], &r);
    assert_eq!(
        o.stderr,
        "roster R: Invalid ranks option: 'x': Invalid argument\n"
    );
    let o = run(&["decode", "--exclude", "x"], &r);
    assert_eq!(
        o.stderr,
        "roster R: Invalid idset in --exclude option: x: Invalid argument\n"
    );
}

#[test]
fn append() {
    let cases: &[(&[&str], &[&str], i32, &str)] = &[
        (
            &["-r", "1-10", "-c", "0-3"],
            &["-r", "1", "-c", "0-3"],
            0,
            "",
        ),
        (
            &["-r", "1-10", "-c", "0-3"],
            &["-r", "0", "-c", "0-3"],
            1,
            "roster R: rank 0 not found in expected ranks\n",
        ),
        (
            &["-r", "1", "-c", "0-3", "-H", "foo1"],
            &["-r", "1", "-c", "0-3", "-H", "foo12"],
            1,
            "roster R: rank 1 got hostname 'foo12', expected 'foo1'\n",
        ),
        (
            &["-r", "1", "-c", "0-3", "-H", "x"],
            &["-r", "1", "-c", "0-2", "-H", "x"],
            1,
            "roster R: rank 1 (x) missing resources: core3\n",
        ),
        (
            &["-r", "1", "-c", "0-3", "-H", "x"],
            &["-r", "1", "-c", "0-7", "-g", "1", "-H", "x"],
            0,
            "roster R: rank 1 (x) has extra resources: core[4-7],gpu1\n",
        ),
    ];
    for &(expected, got, code, stderr) in cases {
        let o = run(&["verify"], &format!("{}{}", encode(expected), encode(got)));
        let what = format!("{expected:?} {got:?}");
        assert_eq!((o.code, o.stderr.as_str()), (code, stderr), "{what}");
    }
    let o = run(&["verify"], &encode(&[]));
    assert_eq!(
        o.stderr,
        "roster R: verify requires exactly 2 R objects on stdin\n"
    );
}

#[test]
fn scheduling_key_is_preserved() {
    let r = encode(&["-r", "0-3", "-c", "0-3", "-g", "0", "-H", "foo[0-3]"]);
    // jq '.scheduling = 42' (pretty printed)
    let mut v: serde_json::Value = serde_json::from_str(&r).expect("json");
    v["scheduling"] = serde_json::json!(42);
    let orig = serde_json::to_string_pretty(&v).expect("json");
    let has42 = |s: &str| {
        let v: serde_json::Value = serde_json::from_str(s).expect("json");
        v["scheduling"] == serde_json::json!(42)
    };
    assert!(has42(&ok(&["decode"], &orig)));
    assert!(has42(&ok(&["decode", "--include", "0"], &orig)));
    assert!(has42(&ok(&["decode", "--exclude", "0"], &orig)));
    assert!(has42(&ok(
        &["decode"],
        &ok(&["append"], &format!("{orig}{}", encode(&["-r", "4"])))
    )));
    assert!(has42(&ok(&["decode"], &ok(&["remap"], &orig))));
    assert!(has42(&ok(
        &["diff"],
        &format!("{orig}{}", encode(&["-r", "1"]))
    )));
    assert!(has42(&ok(
        &["intersect"],
        &format!("{orig}{}", encode(&["-r", "1", "-H", "foo1"]))
    )));
}

#[test]
fn local_and_hosts() {
    let ncores = decode(&["--count", "cores"], &encode(&["--local"]));
    let r = encode(&["--local", "--hosts=fluke[0-16]"]);
    assert_eq!(decode(&["--count", "cores"], &r), ncores);
    assert_eq!(decode(&["--nodelist"], &r), "fluke[0-16]");
    assert_eq!(decode(&["--count", "node"], &r), "17");
}

fn conf_dir(name: &str, toml: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("roster-r-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("resource.toml"), toml).expect("write");
    dir
}

fn parse_config(name: &str, toml: &str) -> Out {
    let dir = conf_dir(name, toml);
    let o = run(&["parse-config", &dir.to_string_lossy()], "");
    let _ = std::fs::remove_dir_all(&dir);
    o
}

#[test]
fn parse_config_works() {
    let o = parse_config(
        "one",
        "[[resource.config]]\nhosts = \"foo\"\ncores = \"0-1\"\ngpus = \"0\"\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(decode(&["-c", "node"], &o.stdout), "1");
    assert_eq!(decode(&["-c", "core"], &o.stdout), "2");
    assert_eq!(decode(&["-c", "gpu"], &o.stdout), "1");
    assert_eq!(decode(&["--nodelist"], &o.stdout), "foo");
    let o = parse_config(
        "multi",
        "[[resource.config]]\nhosts = \"foo[0-2]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo2\"\ngpus = \"0\"\n[[resource.config]]\nhosts = \"foo0\"\nproperties = [\"login\"]\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        line(o.stdout.clone()),
        r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-1"}}, {"rank": "2", "children": {"gpu": "0", "core": "0-1"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["foo[0-2]"], "properties": {"login": "0"}}}"#
    );
    assert_eq!(decode(&["-c", "node"], &o.stdout), "3");
    assert_eq!(decode(&["-c", "core"], &o.stdout), "6");
    assert_eq!(decode(&["-c", "gpu"], &o.stdout), "1");
    assert_eq!(decode(&["--nodelist"], &o.stdout), "foo[0-2]");
    assert_eq!(decode(&["-p", "login", "--nodelist"], &o.stdout), "foo0");
}

#[test]
fn parse_config_errors() {
    let e = |name: &str, toml: &str| {
        let o = parse_config(name, toml);
        assert_eq!(o.code, 1, "{name}");
        o.stderr
    };
    assert_eq!(
        e("nohosts", "[[resource.config]]\n"),
        "roster R: Config file error: config[0]: Object item not found: hosts\n"
    );
    assert_eq!(
        e("missing", "[resource]\nnoverify = true\n"),
        "roster R: Config file error: resource.config or resource.path must be defined\n"
    );
    assert_eq!(
        e("emptyhost", "[[resource.config]]\nhosts = \"foo\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"\"\ncores = \"0-3\"\n"),
        "roster R: Config file error: config[1]: empty hostlist specified\n"
    );
    assert_eq!(
        e(
            "badhost",
            "[[resource.config]]\nhosts = \"foo[p]\"\ncores = \"0-1\"\n"
        ),
        "roster R: Config file error: config[0]: invalid hostlist 'foo[p]'\n"
    );
    assert_eq!(
        e(
            "badcores",
            "[[resource.config]]\nhosts = \"foo0\"\ncores = \"0-\"\n"
        ),
        "roster R: Config file error: config[0]: invalid idset cores='0-'\n"
    );
    assert_eq!(
        e(
            "badgpus",
            "[[resource.config]]\nhosts = \"foo0\"\ngpus = \"2,1\"\n"
        ),
        "roster R: Config file error: config[0]: invalid idset gpus='2,1'\n"
    );
    assert_eq!(
        e("nores", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo11\"\n"),
        "roster R: Config file error: resource.config: foo11 assigned no resources\n"
    );
    assert_eq!(
        e("nohosts2", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\ncores = \"0-1\"\n"),
        "roster R: Config file error: config[1]: Object item not found: hosts\n"
    );
    assert_eq!(
        e("junk", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo11\"\ncores = \"0-3\"\njunk = 5\n"),
        "roster R: Config file error: config[1]: 1 object item(s) left unpacked: junk\n"
    );
    assert_eq!(
        e("badprop", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo1\"\nproperties = [\"de^bug\"]\n"),
        "roster R: Config file error: config[1]: invalid property \"\"de^bug\"\"\n"
    );
    assert_eq!(
        e("intprop", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo1\"\nproperties = [1]\n"),
        "roster R: Config file error: config[1]: invalid property \"1\"\n"
    );
    assert_eq!(
        e("propstr", "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo11\"\ncores = \"0-3\"\nproperties = \"foo\"\n"),
        "roster R: Config file error: config[1]: properties must be an array\n"
    );
    let o = run(&["parse-config", "/nonexistent-roster-dir"], "");
    assert_eq!(
        o.stderr,
        "roster R: flux_conf_parse: stat: /nonexistent-roster-dir: No such file or directory\n"
    );
}

#[test]
fn parse_config_resource_path() {
    let dir = std::env::temp_dir().join(format!("roster-r-cli-{}-path", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf")).expect("mkdir");
    let rpath = dir.join("R.path");
    std::fs::write(&rpath, encode(&["-r", "0-1"])).expect("write");
    let conf = dir.join("conf");
    std::fs::write(
        conf.join("resource.toml"),
        format!("resource.path = \"{}\"\n", rpath.display()),
    )
    .expect("write");
    let o = run(&["parse-config", &conf.to_string_lossy()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(decode(&["-c", "node"], &o.stdout), "2");
    // a bad R, then none
    let p = rpath.display();
    for (r, want) in [
        (
            Some("bad json\n"),
            format!("{p}: '[' or '{{' expected near 'bad' on line 1"),
        ),
        (
            Some("{\"version\": 2, \"execution\": {\"R_lite\": []}}"),
            format!("{p}: invalid version=2"),
        ),
        (
            None,
            format!("{p}: unable to open {p}: No such file or directory"),
        ),
    ] {
        match r {
            Some(text) => std::fs::write(&rpath, text).expect("write"),
            None => std::fs::remove_file(&rpath).expect("remove"),
        }
        let o = run(&["parse-config", &conf.to_string_lossy()], "");
        let want = format!("roster R: {want}\n");
        assert_eq!((o.code, o.stderr), (1, want), "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multiple_inputs_are_unioned() {
    // decode reads every object and unions them; the union moves
    // overlapping ranks to the end of flux's node list.
    let r = format!(
        "{}{}",
        encode(&["-r", "0-3", "-c", "0-1"]),
        encode(&["-r", "1", "-c", "2"])
    );
    assert_eq!(
        decode(&["--short"], &r),
        "rank[0,2-3]/core[0-1] rank1/core[0-2]"
    );
    // Trailing garbage after the last object is ignored, as with jansson.
    let r = format!("{} garbage", encode(&["-r", "0"]));
    assert_eq!(decode(&["--short"], &r), "rank0/core0");
}

#[test]
fn usage_and_help() {
    let o = run(&[], "");
    assert_eq!(o.code, 1);
    let o = run(&["bogus"], "");
    assert_eq!(o.code, 1);
    let o = run(&["decode", "--help"], "");
    assert_eq!(o.code, 0);
    assert!(o.stdout.starts_with("Usage: roster R decode [OPTIONS]..."));
}

/// Reals are written as jansson ≥ 2.14 writes them (shortest round trip),
/// the same rule as eventlog lines: `0.1`, not `%.17g`'s
/// `0.10000000000000001`.
#[test]
fn reals_shortest_like_the_eventlog() {
    let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0"}}],"starttime":1e-5,"expiration":0.1,"nodelist":["a"]}}"#;
    let out = ok(&["remap"], r);
    assert!(
        out.contains(r#""starttime": 1e-5, "expiration": 0.1"#),
        "{out}"
    );
}

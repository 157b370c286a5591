//! Sub-command tests against the fake service: outputs, diagnostics, exit
//! codes and the requests sent.

mod fake;

use super::service::{StreamItem, SvcError};
use super::{run, Ctx};
use fake::Fake;
use resource_views::FixedZone;
use rpc::errno::{EEXIST, EINVAL, ENODATA, ENOSYS, EPERM};
use rpc::RpcError;
use serde_json::{json, Value};

struct Out {
    stdout: String,
    stderr: String,
    code: i32,
    log: Vec<(String, Value)>,
}

impl Out {
    fn topics(&self) -> Vec<&str> {
        self.log.iter().map(|(t, _)| t.as_str()).collect()
    }
    fn payload(&self, topic: &str) -> Value {
        self.log
            .iter()
            .find(|(t, _)| t == topic)
            .map(|(_, p)| p.clone())
            .unwrap_or(Value::Null)
    }
}

fn run_full(words: &[&str], fake: Fake, env: &[(&str, &str)], stdin: &str, tty: bool) -> Out {
    let log = fake.log.clone();
    let mut fake = Some(fake);
    let mut out: Vec<u8> = Vec::new();
    let mut err: Vec<u8> = Vec::new();
    let vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain([
            (
                "XDG_CONFIG_HOME".to_string(),
                "/nonexistent/roster-test".to_string(),
            ),
            (
                "XDG_CONFIG_DIRS".to_string(),
                "/nonexistent/roster-test".to_string(),
            ),
        ])
        .collect();
    let envf = move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut input = stdin.as_bytes();
    let zone = FixedZone::utc();
    let now = || 1000.0;
    let code = {
        let mut ctx = Ctx {
            out: &mut out,
            err: &mut err,
            env: &envf,
            stdin: &mut input,
            stdout_tty: tty,
            columns: 80,
            zone: &zone,
            cwd: "/work/dir".into(),
            now: &now,
        };
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let mut make = |_: &pycompat::argparse::Namespace| -> Box<dyn super::service::Service> {
            Box::new(fake.take().unwrap_or_default())
        };
        run(&words, &mut ctx, &mut make)
    };
    let log = log.borrow().clone();
    Out {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        code,
        log,
    }
}

fn run_with(words: &[&str], fake: Fake) -> Out {
    run_full(words, fake, &[], "", false)
}

/// `words` against a service whose `resource.status` is [`example_status`].
fn run_on_example(words: &[&str]) -> Out {
    run_with(
        words,
        Fake::new().json("resource.status", &example_status()),
    )
}

/// The stderr of a run that must exit 1.
#[track_caller]
fn fails_with(words: &[&str], fake: Fake) -> String {
    let o = run_with(words, fake);
    assert_eq!(o.code, 1, "{words:?}: {}", o.stderr);
    o.stderr
}

const R4: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3"}}],"starttime":0.0,"expiration":0.0,"nodelist":["foo[1-4]"]}}"#;
const EMPTY_R: &str =
    r#"{"version":1,"execution":{"R_lite":[],"starttime":0.0,"expiration":0.0,"nodelist":[""]}}"#;

/// t2351's example.json: R foo[1-4]; 0 and 1 drained; 0 excluded; 1 offline.
fn example_status() -> String {
    format!(
        r#"{{"R":{R4},"drain":{{"0":{{"timestamp":1607544031.1368911,"reason":"bad node"}},"1":{{"timestamp":1607544037.2190773,"reason":"testing drain"}}}},"exclude":"0","offline":"1","online":"0,2-3"}}"#
    )
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for d in it.by_ref() {
                if d == 'm' {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

// ------------------------------------------------------------------ argparse

#[test]
fn usage_errors_exit_2_with_subcommand_usage() {
    let o = run_with(&["undrain"], Fake::new());
    assert_eq!(o.code, 2);
    assert_eq!(o.stdout, "");
    assert_eq!(
        o.stderr,
        "usage: roster resource undrain [-h] [-f] [-u] targets ...\n\
         roster resource undrain: error: the following arguments are required: targets, reason\n"
    );
    assert!(o.log.is_empty());

    let o = run_with(&["drain", "--force=2"], Fake::new());
    assert_eq!(o.code, 2);
    assert_eq!(
        o.stderr,
        "usage: roster resource drain [-h] [-f] [-u] [-i TARGETS] [-q QUEUE,...]\n\
         \x20                            [-o FORMAT] [-n] [-L [WHEN]] [--json]\n\
         \x20                            [targets] ...\n\
         roster resource drain: error: argument -f/--force: ignored explicit argument '2'\n"
    );

    for (args, ending) in [
        (
            &["list", "--s", "x"][..],
            "roster resource list: error: ambiguous option: --s could match --states, --skip-empty\n",
        ),
        (
            &["eventlog", "-f", "xml"],
            "roster resource eventlog: error: argument -f/--format: invalid choice: 'xml' (choose from 'text', 'json')\n",
        ),
        // unrecognized arguments are reported by the top parser
        (
            &["status", "--bogus"],
            "roster resource: error: unrecognized arguments: --bogus\n",
        ),
        (
            &[],
            "roster resource: error: the following arguments are required: subcommand\n",
        ),
    ] {
        let o = run_with(args, Fake::new());
        assert_eq!(o.code, 2, "{args:?}");
        assert!(o.stderr.ends_with(ending), "{args:?}: {}", o.stderr);
    }
    let o = run_with(&["status", "--bogus"], Fake::new());
    let usage = "usage: roster resource [-h] [--uri URI] [--token-file FILE] [--ca FILE]\n";
    assert!(o.stderr.starts_with(usage), "{}", o.stderr);
}

#[test]
fn help_goes_to_stdout() {
    let o = run_with(&["info", "-h"], Fake::new());
    assert_eq!(o.code, 0);
    assert_eq!(
        o.stdout,
        "usage: roster resource info [-h] [-s STATE,...] [-i TARGETS] [-q QUEUE,...]\n\
         \x20                           [--json]\n\
         \n\
         options:\n\
         \x20 -h, --help              show this help message and exit\n\
         \x20 -s, --states=STATE,...  Show output only for resources in given states\n\
         \x20 -i, --include=TARGETS   Include only specified targets in output set.\n\
         \x20                         TARGETS may be provided as an idset or hostlist.\n\
         \x20 -q, --queue=QUEUE,...   Include only specified queues in output\n\
         \x20     --json              Print one JSON document instead of the line (Roster)\n"
    );
    assert_eq!(o.stderr, "");
}

// ------------------------------------------------------------------ status

#[test]
fn status_default_format_without_a_terminal() {
    let o = run_on_example(&["status"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // color off: the text in front of {color_up} is dropped, as flux does
    assert_eq!(
        o.stdout,
        "       STATEUP NNODES NODELIST\n\
         \x20      avail ✔      2 foo[3-4]\n\
         \x20    exclude ✔      1 foo1\n\
         \x20    drained ✔      1 foo1\n\
         \x20   drained* ✗      1 foo2\n"
    );
    assert_eq!(o.stderr, "");
    assert_eq!(
        o.topics(),
        [
            "resource.status",
            "job-manager.stats-get",
            "resource.sched-status",
            "sched.resource-status"
        ]
    );
}

#[test]
fn status_with_color_is_the_reference_sample() {
    let o = run_on_example(&["status", "-Lalways"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("\x1b[01;32m"));
    assert_eq!(
        strip_ansi(&o.stdout),
        "       STATE UP NNODES NODELIST\n\
         \x20      avail  ✔      2 foo[3-4]\n\
         \x20    exclude  ✔      1 foo1\n\
         \x20    drained  ✔      1 foo1\n\
         \x20   drained*  ✗      1 foo2\n"
    );
    // -L auto follows the terminal
    let fake = Fake::new().json("resource.status", &example_status());
    let o = run_full(&["status"], fake, &[], "", true);
    assert!(o.stdout.contains("\x1b[01;32m"));
}

#[test]
fn status_static_format_and_states() {
    let fmt = "{state:>10} {nnodes:>6} {ranks:<15} {nodelist}";
    let o = run_on_example(&["status", "-o", fmt]);
    assert_eq!(
        o.stdout,
        "     STATE NNODES RANKS           NODELIST\n\
         \x20    avail      2 2-3             foo[3-4]\n\
         \x20  exclude      1 0               foo1\n\
         \x20  drained      1 0               foo1\n\
         \x20 drained*      1 1               foo2\n"
    );
    let o = run_on_example(&["status", "-s", "drain", "-no", "{ranks}"]);
    // lines differing only in ranks merge (t2311 relies on it)
    assert_eq!(o.stdout, "0-1\n");
}

#[test]
fn status_draining_needs_allocated_ranks() {
    let alloc = r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":0.0,"expiration":0.0,"nodelist":["foo1"]}}"#;
    let fake = Fake::new().json("resource.status", &example_status()).json(
        "resource.sched-status",
        &format!(r#"{{"all":{R4},"down":{EMPTY_R},"allocated":{alloc}}}"#),
    );
    let o = run_with(&["status", "-s", "drain", "-no", "{state} {ranks}"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "draining 0\ndrained* 1\n");
    assert!(!o.topics().contains(&"sched.resource-status"));
}

#[test]
fn status_state_errors_and_help_send_nothing() {
    const VALID: &str = "roster-resource: INFO: valid states: all,online,avail,offline,exclude,drain,draining,drained,torpid,allocated,housekeeping\n";
    let invalid =
        format!("roster-resource: ERROR: Invalid resource state frelled specified\n{VALID}");
    let formats = "\nConfigured flux-resource output formats:\n\n  default      Default flux-resource status format string\n  long         Long flux-resource status format string\n";
    for (args, code, stdout, stderr) in [
        (["status", "-s", "help"], 0, "", VALID),
        (["status", "-s", "frelled"], 1, "", &invalid),
        (["status", "-o", "help"], 0, formats, ""),
        (
            ["status", "-o", "nosuch"],
            1,
            "",
            "roster-resource: ERROR: --format: No such format nosuch\n",
        ),
    ] {
        let o = run_with(&args, Fake::new());
        assert_eq!(o.code, code, "{args:?}");
        assert_eq!(o.stdout, stdout, "{args:?}");
        assert_eq!(o.stderr, stderr, "{args:?}");
        assert!(o.log.is_empty(), "{args:?}");
    }
}

#[test]
fn status_rpc_errors() {
    let fake = Fake::new().reply(
        "resource.status",
        Err(SvcError::Rpc(RpcError::bare(ENOSYS))),
    );
    let o = run_with(&["status"], fake);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: Function not implemented\n"
    );
    assert_eq!(o.topics(), ["resource.status"]);

    let fake = Fake::new().reply(
        "resource.status",
        Err(SvcError::Connect(
            "cannot connect to unix:///run/roster.sock: No such file or directory".into(),
        )),
    );
    assert_eq!(
        fails_with(&["status"], fake),
        "roster-resource: ERROR: cannot connect to unix:///run/roster.sock: No such file or directory\n\
         roster-resource: INFO: is a service running? Start one with `roster serve &`, or point --uri / ROSTER_URI at it\n"
    );

    // over TLS, the hint names the TLS flags
    let fake = Fake::new().reply(
        "resource.status",
        Err(SvcError::Connect(
            "cannot connect to tls://head:8050: Connection refused".into(),
        )),
    );
    let o = run_with(&["status"], fake);
    assert!(
        o.stderr.ends_with(
            "roster-resource: INFO: is `roster serve` listening there? TLS needs --ca (ROSTER_CA) to check the service, and --cert/--key (ROSTER_CERT/ROSTER_KEY) or --token-file for your role\n"
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn status_format_default_from_environment() {
    let fake = Fake::new().json("resource.status", &example_status());
    let o = run_full(
        &["status"],
        fake,
        &[(
            "FLUX_RESOURCE_STATUS_FORMAT_DEFAULT",
            "{nodelist} {nodelist}",
        )],
        "",
        false,
    );
    assert_eq!(o.code, 0);
    assert!(o.stdout.starts_with("NODELIST NODELIST\n"), "{}", o.stdout);
}

#[test]
fn status_from_stdin_and_queues_from_config_file() {
    let o = run_full(
        &["status", "--from-stdin", "-no", "{state} {nodelist}"],
        Fake::new(),
        &[],
        &example_status(),
        false,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "avail foo[3-4]\nexclude foo1\ndrained foo1\ndrained* foo2\n"
    );
    assert!(o.log.is_empty());

    let o = run_full(
        &["status", "--from-stdin", "-q", "nosuch"],
        Fake::new(),
        &[],
        &example_status(),
        false,
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: --queue: nosuch: no such queue\n"
    );
}

// ------------------------------------------------------------------ drain listing

#[test]
fn drain_listing() {
    let o = run_on_example(&["drain"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "TIME         STATE    REASON                         NODELIST\n\
         Dec09 20:00  drained  bad node                       foo1\n\
         Dec09 20:00  drained* testing drain                  foo2\n"
    );
    let o = run_on_example(&["drain", "-n", "-o", "{ranks} {reason}", "-i", "1"]);
    assert_eq!(o.stdout, "1 testing drain\n");
    let fake = Fake::new().json("resource.status", &example_status());
    let o = run_full(
        &["drain"],
        fake,
        &[("FLUX_RESOURCE_DRAIN_FORMAT_DEFAULT", "long")],
        "",
        false,
    );
    assert!(
        o.stdout
            .starts_with("TIME         STATE    RANKS    REASON"),
        "{}",
        o.stdout
    );
    let o = run_with(&["drain", "-o", "help"], Fake::new());
    assert_eq!(
        o.stdout,
        "\nConfigured flux-resource output formats:\n\n  long         Long flux-resource drain format string\n  default      Default flux-resource drain format string\n"
    );
    assert!(o.log.is_empty());
}

// ------------------------------------------------------------------ drain / undrain

#[test]
fn drain_payloads() {
    let cases: [(&[&str], Value); 5] = [
        (&["drain", "1"], json!({"targets": "1"})),
        (
            &["drain", "-f", "fake[2-3]", "bad", "dimm"],
            json!({"targets": "fake[2-3]", "mode": "overwrite", "reason": "bad dimm"}),
        ),
        (
            &["drain", "-ff", "1", "x"],
            json!({"targets": "1", "mode": "force-overwrite", "reason": "x"}),
        ),
        (
            &["drain", "--update", "0-1", "r"],
            json!({"targets": "0-1", "mode": "update", "reason": "r"}),
        ),
        (
            &["drain", "0", "happy", "happy,", "joy", "joy"],
            json!({"targets": "0", "reason": "happy happy, joy joy"}),
        ),
    ];
    for (words, expected) in cases {
        let o = run_with(words, Fake::new().json("resource.drain", "null"));
        assert_eq!(o.code, 0, "{words:?}: {}", o.stderr);
        assert_eq!(o.stdout, "");
        assert_eq!(o.stderr, "");
        assert_eq!(o.payload("resource.drain"), expected, "{words:?}");
        // key order is part of the wire format (targets, mode, reason)
        assert_eq!(
            serde_json::to_string(&o.payload("resource.drain")).unwrap_or_default(),
            serde_json::to_string(&expected).unwrap_or_default()
        );
    }
}

#[test]
fn drain_errors() {
    let o = run_with(&["drain", "-u", "-f", "1"], Fake::new());
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: Only one of --force and --update may be specified\n"
    );
    assert!(o.log.is_empty());

    let fake = Fake::new().reply(
        "resource.drain",
        Err(SvcError::rpc(EEXIST, "rank 1 already drained")),
    );
    assert_eq!(
        fails_with(&["drain", "0-1"], fake),
        "roster-resource: ERROR: [Errno 17] rank 1 already drained\n\
         roster-resource: INFO: Use --force to overwrite existing drain reason\n"
    );

    let fake = Fake::new().reply(
        "resource.drain",
        Err(SvcError::rpc(EINVAL, "rank 0 excluded")),
    );
    assert_eq!(
        fails_with(&["drain", "0", "reason"], fake),
        "roster-resource: ERROR: [Errno 22] rank 0 excluded\n"
    );

    let fake = Fake::new().reply("resource.drain", Err(SvcError::Rpc(RpcError::bare(ENOSYS))));
    let o = run_with(&["drain", "1"], fake);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 38] Function not implemented\n"
    );

    let fake = Fake::new().reply(
        "resource.drain",
        Err(SvcError::Connect(
            "cannot connect to unix:///x: Connection refused".into(),
        )),
    );
    let o = run_with(&["drain", "1"], fake);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: cannot connect to unix:///x: Connection refused\n\
         roster-resource: INFO: is a service running? Start one with `roster serve &`, or point --uri / ROSTER_URI at it\n"
    );
}

#[test]
fn undrain_payloads_and_errors() {
    let cases: [(&[&str], Value); 4] = [
        (&["undrain", "1"], json!({"targets": "1"})),
        (
            &["undrain", "--force", "3"],
            json!({"targets": "3", "mode": "overwrite"}),
        ),
        (
            &["undrain", "-ff", "1-2", "reason for undrain"],
            json!({"targets": "1-2", "mode": "force-overwrite", "reason": "reason for undrain"}),
        ),
        (
            &["undrain", "-u", "fake0"],
            json!({"targets": "fake0", "mode": "update"}),
        ),
    ];
    for (words, expected) in cases {
        let o = run_with(words, Fake::new().json("resource.undrain", "null"));
        assert_eq!(o.code, 0, "{words:?}: {}", o.stderr);
        assert_eq!(o.payload("resource.undrain"), expected);
    }
    let fake = Fake::new().reply(
        "resource.undrain",
        Err(SvcError::rpc(EEXIST, "ranks 1-2 not drained")),
    );
    assert_eq!(
        fails_with(&["undrain", "0-2"], fake),
        "roster-resource: ERROR: ranks 1-2 not drained\n"
    );

    assert_eq!(
        fails_with(&["undrain", "-f", "-u", "0"], Fake::new()),
        "roster-resource: ERROR: Only one of --force and --update may be specified\n"
    );
}

#[test]
fn reload_sends_absolute_path() {
    let o = run_with(
        &["reload", "sub/../R.json"],
        Fake::new().json("resource.reload", "null"),
    );
    assert_eq!(o.code, 0);
    assert_eq!(
        o.payload("resource.reload"),
        json!({"path": "/work/dir/R.json", "xml": false, "force": false})
    );
    let o = run_with(
        &["reload", "-xf", "/xml/"],
        Fake::new().json("resource.reload", "null"),
    );
    assert_eq!(
        o.payload("resource.reload"),
        json!({"path": "/xml", "xml": true, "force": true})
    );
    let fake = Fake::new().reply(
        "resource.reload",
        Err(SvcError::rpc(
            EINVAL,
            "resource object contains ranks execeeding size=4 (override with -f))",
        )),
    );
    assert_eq!(
        fails_with(&["reload", "/R"], fake),
        "roster-resource: ERROR: resource object contains ranks execeeding size=4 (override with -f))\n"
    );
}

#[test]
fn acquire_mute_sends_nothing() {
    let o = run_with(
        &["acquire-mute"],
        Fake::new().json("resource.acquire-mute", "null"),
    );
    assert_eq!(o.code, 0);
    assert_eq!(o.payload("resource.acquire-mute"), json!({}));
}

/// `release` and `group-set`: `{group, targets}`, nothing printed; the
/// service's error printed as an ERROR line.
#[test]
fn release_and_group_set_send_group_and_targets() {
    for (ok, bad, error) in [
        (
            ["release", "default", "1-3"],
            ["release", "default", "4"],
            "targets 4 were not shrunk",
        ),
        (
            ["group-set", "login", "fake[0-1]"],
            ["group-set", "login", "x1"],
            "invalid targets: invalid hosts: x1",
        ),
    ] {
        let topic = format!("resource.{}", ok[0]);
        let o = run_with(&ok, Fake::new().json(&topic, "null"));
        assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{ok:?}");
        let want = json!({"group": ok[1], "targets": ok[2]});
        assert_eq!(o.payload(&topic), want, "{ok:?}");
        let fake = Fake::new().reply(&topic, Err(SvcError::rpc(EINVAL, error)));
        let o = run_with(&bad, fake);
        assert_eq!(o.code, 1, "{bad:?}");
        let want = format!("roster-resource: ERROR: {error}\n");
        assert_eq!(o.stderr, want, "{bad:?}");
    }
}

#[test]
fn acquire_prints_json_lines() {
    let first =
        json!({"resources": serde_json::from_str::<Value>(R4).unwrap_or_default(), "up": "0-3"});
    let fake = Fake::new().stream_items(
        "resource.acquire",
        vec![
            StreamItem::Payload(first.clone()),
            StreamItem::Payload(json!({"down": "1"})),
            StreamItem::End(SvcError::rpc(ENODATA, "")),
        ],
    );
    let o = run_with(&["acquire"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        format!(
            "{}\n{{\"down\":\"1\"}}\n",
            serde_json::to_string(&first).unwrap_or_default()
        )
    );
    assert_eq!(o.payload("resource.acquire"), json!({}));

    let fake = Fake::new().stream_items(
        "resource.acquire",
        vec![StreamItem::End(SvcError::Rpc(RpcError::bare(
            rpc::errno::EBUSY,
        )))],
    );
    let o = run_with(&["acquire", "--group", "batch"], fake);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: Device or resource busy\n"
    );
    assert_eq!(o.payload("resource.acquire"), json!({"group": "batch"}));
}

// ------------------------------------------------------------------ list, info, R

fn sched(all: &str, down: &str, alloc: &str) -> String {
    format!(r#"{{"all":{all},"down":{down},"allocated":{alloc}}}"#)
}

#[test]
fn list_default() {
    let fake = Fake::new().json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R));
    let o = run_with(&["list"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "     STATE NNODES NCORES NGPUS NODELIST\n\
         \x20     free      4     16     0 foo[1-4]\n\
         \x20allocated      0      0     0 \n\
         \x20     down      0      0     0 \n"
    );
    // config.get is not offered: no warning
    assert_eq!(o.stderr, "");
    assert_eq!(o.topics(), ["resource.sched-status", "config.get"]);
}

#[test]
fn list_config_warning_and_errors() {
    let fake = Fake::new()
        .json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R))
        .reply(
            "config.get",
            Err(SvcError::rpc(EPERM, "Operation not permitted")),
        );
    let o = run_with(&["list", "-no", "{nnodes}", "-s", "free"], fake);
    assert_eq!(o.code, 0);
    assert_eq!(o.stdout, "4\n");
    assert_eq!(
        o.stderr,
        "roster-resource: WARNING: Could not get flux config: [Errno 1] Operation not permitted\n"
    );

    let o = run_with(&["list", "-s", "bogus"], Fake::new());
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: Invalid resource state bogus specified\n"
    );
    assert!(o.log.is_empty());

    let o = run_with(&["list"], Fake::new());
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: No service matching sched.resource-status is registered\n"
    );
    assert_eq!(
        o.topics(),
        ["resource.sched-status", "sched.resource-status"]
    );

    let fake = Fake::new().json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R));
    let o = run_full(
        &["list", "-n"],
        fake,
        &[("FLUX_RESOURCE_LIST_RPC", "sched.resource-status")],
        "",
        false,
    );
    assert_eq!(o.code, 1);
    // ENOSYS falls back to sched.resource-status, whatever the topic was
    assert_eq!(
        o.topics(),
        ["sched.resource-status", "sched.resource-status"]
    );
}

#[test]
fn list_down_and_include() {
    let down = r#"{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-3"}}],"starttime":0.0,"expiration":0.0,"nodelist":["foo2"]}}"#;
    let fake = Fake::new().json("resource.sched-status", &sched(R4, down, EMPTY_R));
    let o = run_with(&["list", "-no", "{state} {nodelist}"], fake);
    assert_eq!(o.stdout, "free foo[1,3-4]\nallocated \ndown foo2\n");
    let fake = Fake::new().json("resource.sched-status", &sched(R4, down, EMPTY_R));
    let o = run_with(
        &["list", "-no", "{state} {nodelist}", "-i", "foo[1-2]"],
        fake,
    );
    assert_eq!(o.stdout, "free foo1\ndown foo2\n");
}

#[test]
fn info_and_r() {
    let fake = Fake::new().json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R));
    let o = run_with(&["info"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "4 Nodes, 16 Cores, 0 GPUs\n");

    let fake = Fake::new().json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R));
    let o = run_with(&["R", "-i", "0-1"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: Value = serde_json::from_str(o.stdout.trim_end()).unwrap_or(Value::Null);
    assert_eq!(r["execution"]["R_lite"][0]["rank"], json!("0-1"));
    assert_eq!(r["execution"]["nodelist"], json!(["foo[1-2]"]));
    assert!(o.stdout.ends_with("}\n"));
    // R reads no format configuration and asks for config.get
    assert_eq!(o.topics(), ["resource.sched-status", "config.get"]);
}

#[test]
fn list_from_stdin() {
    let o = run_full(
        &["info", "--from-stdin"],
        Fake::new(),
        &[],
        &sched(R4, EMPTY_R, EMPTY_R),
        false,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "4 Nodes, 16 Cores, 0 GPUs\n");
    assert!(o.log.is_empty());
}

// ------------------------------------------------------------------ eventlog

fn journal(items: Vec<StreamItem>) -> Fake {
    Fake::new().stream_items("resource.journal", items)
}

fn events(v: Value) -> StreamItem {
    StreamItem::Payload(json!({ "events": v }))
}

fn sentinel() -> StreamItem {
    StreamItem::Payload(json!({"events": []}))
}

#[test]
fn eventlog_sorts_backlog_and_stops_at_sentinel() {
    let fake = journal(vec![
        events(
            json!([{"timestamp": 20.5, "name": "restart", "context": {"ranks": "0-3", "online": "", "nodelist": "fake[0-3]"}}]),
        ),
        StreamItem::Payload(
            json!({"events": [{"timestamp": 30.0, "name": "resource-define", "context": {"method": "kvs"}}], "R": {}}),
        ),
        events(
            json!([{"timestamp": 10.25, "name": "drain", "context": {"idset": "0", "nodelist": "fake0", "reason": "testing", "overwrite": 0}}]),
        ),
        sentinel(),
        events(json!([{"timestamp": 40.0, "name": "online", "context": {"idset": "0-3"}}])),
    ]);
    let o = run_with(&["eventlog"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "  10.250000 drain idset=\"0\" nodelist=\"fake0\" reason=\"testing\" overwrite=0\n\
         \x20 20.500000 restart ranks=\"0-3\" online=\"\" nodelist=\"fake[0-3]\"\n\
         \x20 30.000000 resource-define method=\"kvs\"\n"
    );
    assert_eq!(o.payload("resource.journal"), json!({}));
}

#[test]
fn eventlog_json_and_dropped_events() {
    // --json is -f json (and wins over -H)
    for args in [
        &["eventlog", "-f", "json"][..],
        &["eventlog", "--json"],
        &["eventlog", "-H", "--json"],
    ] {
        let fake = journal(vec![
            events(json!([
                {"timestamp": 0, "name": "ignored"},
                {"timestamp": 5.0, "name": "truncate"},
                {"name": "lively", "context": {"idset": "1"}}
            ])),
            sentinel(),
        ]);
        let o = run_with(args, fake);
        assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
        // timestamp <= 0 is dropped; a missing timestamp is "now"
        assert_eq!(
            o.stdout,
            "{\"timestamp\":5.0,\"name\":\"truncate\"}\n{\"name\":\"lively\",\"context\":{\"idset\":\"1\"},\"timestamp\":1000.0}\n",
            "{args:?}"
        );
    }
}

#[test]
fn json_is_in_the_help_where_it_works() {
    for sub in ["status", "drain", "list", "info", "eventlog"] {
        let o = run_with(&[sub, "--help"], Fake::new());
        assert_eq!(o.code, 0);
        let line = o
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("--json"))
            .unwrap_or_else(|| panic!("{sub} --help has no --json:\n{}", o.stdout));
        assert!(
            line.contains("JSON") || line.contains("json"),
            "{sub}: {line}"
        );
    }
    // info --json: list's JSON
    let fake = Fake::new().json("resource.sched-status", &sched(R4, EMPTY_R, EMPTY_R));
    let o = run_with(&["info", "--json"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.starts_with("{\"version\":1,\"lines\":["),
        "{}",
        o.stdout
    );
    // not where it would do nothing
    let o = run_with(&["undrain", "--help"], Fake::new());
    assert!(!o.stdout.contains("--json"), "{}", o.stdout);
}

#[test]
fn eventlog_wait_follows_and_matches_context() {
    let items = vec![
        events(
            json!([{"timestamp": 1.0, "name": "resource-define", "context": {"method": "dynamic-discovery"}}]),
        ),
        sentinel(),
        events(
            json!([{"timestamp": 2.0, "name": "drain", "context": {"idset": "1", "reason": "other"}}]),
        ),
        events(
            json!([{"timestamp": 3.0, "name": "resource-define", "context": {"method": "kvs"}}]),
        ),
        events(
            json!([{"timestamp": 4.0, "name": "drain", "context": {"idset": "1", "reason": "testing"}}]),
        ),
        events(json!([{"timestamp": 5.0, "name": "undrain", "context": {"idset": "1"}}])),
    ];
    let o = run_with(
        &[
            "eventlog",
            "-f",
            "json",
            "--wait=drain",
            "-m",
            "reason=testing",
            "-m",
            "idset=\"1\"",
        ],
        journal(items.clone()),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(
        lines.last().copied(),
        Some("{\"timestamp\":4.0,\"name\":\"drain\",\"context\":{\"idset\":\"1\",\"reason\":\"testing\"}}")
    );
    let o = run_with(
        &["eventlog", "-w", "resource-define"],
        journal(items.clone()),
    );
    assert_eq!(o.stdout.lines().count(), 1);

    // never satisfied: the stream stays open until the timeout
    assert_eq!(
        fails_with(
            &[
                "eventlog",
                "--wait=drain",
                "--match-context=reason=nonexistent",
                "--timeout=0.5"
            ],
            journal(items.clone()),
        ),
        "roster-resource: ERROR: ETIMEDOUT\n"
    );

    // -F without -w ends when the service ends the stream
    let mut with_end = items;
    with_end.push(StreamItem::End(SvcError::rpc(ENODATA, "")));
    let o = run_with(&["eventlog", "-F"], journal(with_end));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 5);
}

#[test]
fn eventlog_option_errors() {
    let o = run_with(
        &["eventlog", "--match-context=noequals"],
        journal(vec![sentinel()]),
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: --match-context: missing '=' in noequals\n"
    );
    assert!(o.log.is_empty());
    let o = run_with(
        &["eventlog", "--match-context==val"],
        journal(vec![sentinel()]),
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: --match-context: empty key in =val\n"
    );
    let o = run_with(
        &["eventlog", "--timeout=notanumber"],
        journal(vec![sentinel()]),
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: invalid Flux standard duration\n"
    );
    assert_eq!(
        fails_with(&["eventlog"], Fake::new()),
        "roster-resource: ERROR: No service matching resource.journal is registered\n"
    );
}

#[test]
fn eventlog_include() {
    let items = vec![
        events(json!([
            {"timestamp": 1.0, "name": "restart", "context": {"ranks": "0-1", "online": "", "nodelist": "fake[0-1]"}},
            {"timestamp": 2.0, "name": "resource-define", "context": {"method": "kvs"}},
            {"timestamp": 3.0, "name": "online", "context": {"idset": "0"}},
            {"timestamp": 4.0, "name": "drain", "context": {"idset": "1", "nodelist": "fake1", "reason": "x", "overwrite": 0}}
        ])),
        sentinel(),
    ];
    let fake = journal(items.clone()).json("attr.get", r#"{"value":"fake[0-1]","flags":0}"#);
    let o = run_with(&["eventlog", "--include=1", "-f", "json"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let names: Vec<String> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_default()["name"].to_string())
        .collect();
    assert_eq!(names, ["\"restart\"", "\"drain\""]);

    // without attr.get, the hostlist comes from R
    let status = format!(
        r#"{{"R":{},"drain":{{}},"online":"0-1","offline":"","exclude":""}}"#,
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"starttime":0.0,"expiration":0.0,"nodelist":["fake[0-1]"]}}"#
    );
    let fake = journal(items.clone()).json("resource.status", &status);
    let o = run_with(&["eventlog", "-i", "fake0", "-H"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 2, "{}", o.stdout);
    assert!(o
        .stdout
        .lines()
        .nth(1)
        .is_some_and(|l| l.contains("online")));

    for (include, what) in [("42", "rank 42"), ("foo", "host foo")] {
        let fake = journal(items.clone()).json("attr.get", r#"{"value":"fake[0-1]","flags":0}"#);
        assert_eq!(
            fails_with(&["eventlog", &format!("--include={include}")], fake),
            format!("roster-resource: ERROR: --include: {what} is not in this instance\n"),
            "{include}"
        );
    }
}

#[test]
fn eventlog_stream_errors() {
    let o = run_with(
        &["eventlog"],
        journal(vec![StreamItem::End(SvcError::Rpc(RpcError::bare(
            ENODATA,
        )))]),
    );
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "roster-resource: ERROR: No data available\n");
    assert_eq!(
        fails_with(
            &["eventlog"],
            journal(vec![StreamItem::Payload(json!({"nope": 1}))]),
        ),
        "roster-resource: ERROR: 'events'\n"
    );
}

#[test]
fn eventlog_human_and_color() {
    let fake = journal(vec![
        events(json!([
            {"timestamp": 1607544031.5, "name": "drain", "context": {"idset": "0"}},
            {"timestamp": 1607544032.0, "name": "undrain", "context": {"idset": "0"}}
        ])),
        sentinel(),
    ]);
    let o = run_with(&["eventlog", "-H"], fake);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "[Dec09 20:00] drain idset=\"0\"\n[  +0.500000] undrain idset=\"0\"\n"
    );
    let fake = journal(vec![
        events(json!([{"timestamp": 1.0, "name": "drain", "context": {"idset": "0"}}])),
        sentinel(),
    ]);
    let o = run_with(&["eventlog", "-L"], fake);
    assert!(o.stdout.contains("\x1b[33mdrain\x1b[0m"), "{:?}", o.stdout);
}

// ------------------------------------------------------------------ --json

fn json_of(o: &Out) -> Value {
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.matches('\n').count(), 1, "one line: {}", o.stdout);
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout))
}

#[test]
fn status_json_is_the_lines_of_the_table() {
    // -o and -n are ignored; the states are the table's
    let o = run_on_example(&["status", "--json", "-o", "{nnodes}", "-n"]);
    assert_eq!(
        json_of(&o),
        json!({"version": 1, "lines": [
            {"state": "avail", "online": true, "nnodes": 2, "ranks": "2-3",
             "nodelist": "foo[3-4]", "reason": null, "timestamp": null},
            {"state": "exclude", "online": true, "nnodes": 1, "ranks": "0",
             "nodelist": "foo1", "reason": null, "timestamp": null},
            {"state": "drained", "online": true, "nnodes": 1, "ranks": "0",
             "nodelist": "foo1", "reason": "bad node", "timestamp": 1607544031.1368911},
            {"state": "drained", "online": false, "nnodes": 1, "ranks": "1",
             "nodelist": "foo2", "reason": "testing drain", "timestamp": 1607544037.2190773},
        ]})
    );
    // -s with an explicit list keeps the empty lines, as the table does
    let o = run_on_example(&["status", "--json", "-s", "torpid"]);
    assert_eq!(
        json_of(&o)["lines"],
        json!([{"state": "torpid", "online": true, "nnodes": 0, "ranks": "",
                "nodelist": "", "reason": null, "timestamp": null}])
    );
    // a bad state is still flux's error, nothing printed on stdout
    let o = run_with(&["status", "--json", "-s", "bogus"], Fake::new());
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
}

#[test]
fn drain_json_lists_drained_nodes() {
    let o = run_on_example(&["drain", "--json", "-i", "foo2"]);
    assert_eq!(
        json_of(&o),
        json!({"version": 1, "lines": [
            {"state": "drained", "online": false, "nnodes": 1, "ranks": "1",
             "nodelist": "foo2", "reason": "testing drain", "timestamp": 1607544037.2190773},
        ]})
    );
    // nothing drained: no lines
    let st = r#"{"R":null,"offline":"","online":"","exclude":"","torpid":"","drain":{}}"#;
    let o = run_with(
        &["drain", "--json"],
        Fake::new().json("resource.status", st),
    );
    assert_eq!(json_of(&o), json!({"version": 1, "lines": []}));
}

#[test]
fn list_json_has_counts_and_sets() {
    let down = r#"{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-3"}}],"starttime":0.0,"expiration":0.0,"nodelist":["foo2"]}}"#;
    let fake = Fake::new().json("resource.sched-status", &sched(R4, down, EMPTY_R));
    let o = run_with(&["list", "--json"], fake);
    assert_eq!(
        json_of(&o),
        json!({"version": 1, "lines": [
            {"state": "free", "properties": [], "queues": [], "nnodes": 3, "ncores": 12,
             "ngpus": 0, "ranks": "0,2-3", "nodelist": "foo[1,3-4]"},
            {"state": "allocated", "properties": [], "queues": [], "nnodes": 0, "ncores": 0,
             "ngpus": 0, "ranks": "", "nodelist": ""},
            {"state": "down", "properties": [], "queues": [], "nnodes": 1, "ncores": 4,
             "ngpus": 0, "ranks": "1", "nodelist": "foo2"},
        ]})
    );
    // -i skips empty lines, as the table does
    let fake = Fake::new().json("resource.sched-status", &sched(R4, down, EMPTY_R));
    let o = run_with(&["list", "--json", "-i", "foo2"], fake);
    let lines = json_of(&o)["lines"].clone();
    assert_eq!(lines.as_array().map(Vec::len), Some(1), "{lines}");
    assert_eq!(lines[0]["state"], "down");
}

#[test]
fn list_json_properties_and_queues() {
    let all = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"starttime":0.0,"expiration":0.0,"nodelist":["foo[1-4]"],"properties":{"debug":"0-1"}}}"#;
    let fake = Fake::new()
        .json("resource.sched-status", &sched(all, EMPTY_R, EMPTY_R))
        .json(
            "config.get",
            r#"{"queues":{"debug":{"requires":["debug"]},"batch":{}}}"#,
        );
    let o = run_with(&["list", "--json", "-s", "free"], fake);
    let doc = json_of(&o);
    let lines = doc["lines"].as_array().cloned().unwrap_or_default();
    assert_eq!(lines.len(), 2, "{doc}");
    let debug = lines
        .iter()
        .find(|l| l["properties"] == json!(["debug"]))
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(debug["ranks"], "0-1");
    let mut q: Vec<String> = serde_json::from_value(debug["queues"].clone()).unwrap_or_default();
    q.sort();
    assert_eq!(q, ["batch", "debug"]);
    let plain = lines
        .iter()
        .find(|l| l["properties"] == json!([]))
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(plain["queues"], json!(["batch"]));
    assert_eq!(plain["nodelist"], "foo[3-4]");
}

// ------------------------------------------------------------------ hints

#[test]
fn out_of_range_targets_name_the_valid_ones() {
    // flux's ERROR line stays byte-identical; Roster's INFO lines follow
    let fake = Fake::new()
        .reply(
            "resource.drain",
            Err(SvcError::rpc(EINVAL, "idset is out of range")),
        )
        .json("resource.status", &example_status());
    let o = run_with(&["drain", "7"], fake);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 22] idset is out of range\n\
         roster-resource: INFO: valid targets: ranks 0-3 or hosts foo[1-4]\n"
    );
    assert_eq!(o.topics(), ["resource.drain", "resource.status"]);

    let fake = Fake::new()
        .reply(
            "resource.undrain",
            Err(SvcError::rpc(
                EINVAL,
                "invalid targets: invalid hosts: fo2,bar",
            )),
        )
        .json("resource.status", &example_status());
    assert_eq!(
        fails_with(&["undrain", "fo2,bar"], fake),
        "roster-resource: ERROR: invalid targets: invalid hosts: fo2,bar\n\
         roster-resource: INFO: valid targets: ranks 0-3 or hosts foo[1-4]\n\
         roster-resource: INFO: did you mean 'foo2' (for 'fo2')?\n"
    );

    // other errors get no hint, and no extra request
    let fake = Fake::new().reply(
        "resource.drain",
        Err(SvcError::rpc(EINVAL, "something else")),
    );
    let o = run_with(&["drain", "7"], fake);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 22] something else\n"
    );
    assert_eq!(o.topics(), ["resource.drain"]);

    // the status cannot be fetched: flux's line alone
    let fake = Fake::new().reply(
        "resource.drain",
        Err(SvcError::rpc(EINVAL, "idset is out of range")),
    );
    let o = run_with(&["drain", "7"], fake);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 22] idset is out of range\n"
    );
}

#[test]
fn mistyped_subcommand_gets_a_suggestion_after_the_usage_error() {
    let o = run_with(&["drian", "0"], Fake::new());
    assert_eq!(o.code, 2);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert!(
        lines[lines.len() - 2].starts_with(
            "roster resource: error: argument subcommand: invalid choice: 'drian' (choose from"
        ),
        "{}",
        o.stderr
    );
    assert_eq!(
        lines[lines.len() - 1],
        "roster-resource: INFO: did you mean 'drain'?"
    );
    let o = run_with(&["frobnicate"], Fake::new());
    assert!(!o.stderr.contains("did you mean"), "{}", o.stderr);
}

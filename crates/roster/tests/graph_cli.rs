//! `roster graph` end to end: loading R, JGF (Fluxion's verbose and
//! compact forms) and hwloc XML, and the resource-query-like commands.

mod common;

use common::{run_stdin, Out};

use serde_json::{json, Value};

fn data(f: &str) -> String {
    format!("{}/tests/data/graph/{f}", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str], stdin: &str) -> Out {
    run_stdin(&[&["graph"][..], args].concat(), stdin)
}

/// Commands with `@NAME` replaced by the path of a test data file.
fn script(lines: &[&str]) -> String {
    let mut s = String::new();
    for l in lines {
        let words: Vec<String> = l
            .split(' ')
            .map(|w| match w.strip_prefix('@') {
                Some(f) => data(f),
                None => w.to_string(),
            })
            .collect();
        s += &words.join(" ");
        s.push('\n');
    }
    s
}

/// `roster graph -L LOAD OPTS` (LOAD a test data file) running the
/// script of `lines`.
fn run_script(load: &str, opts: &[&str], lines: &[&str]) -> Out {
    run(&[&["-L", &data(load)][..], opts].concat(), &script(lines))
}

/// Each line of `o`'s output as JSON (`--json`).
fn values(o: &Out) -> Vec<Value> {
    o.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const ALLOCATED: &str = "INFO: =============================\n";

#[test]
fn match_allocate_prints_r_and_banner() {
    let o = run_script(
        "tiny.R.json",
        &[],
        &[
            "match allocate @node-x2.yaml",
            "match allocate @slot-core8.yaml",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let want = concat!(
        r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"gpu": "0-1", "core": "0-7"}}], "starttime": 0.0, "expiration": 3600.0, "nodelist": ["tiny[0-1]"], "properties": {"ssd": "0"}}}"#,
        "\n",
        "INFO: =============================\n",
        "INFO: JOBID=1\n",
        "INFO: RESOURCES=ALLOCATED\n",
        "INFO: SCHEDULED AT=Now\n",
        "INFO: =============================\n",
        r#"{"version": 1, "execution": {"R_lite": [{"rank": "2", "children": {"core": "0-7"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["tiny2"], "properties": {"gpu-a100": "2"}}}"#,
        "\n",
        "INFO: =============================\n",
        "INFO: JOBID=2\n",
        "INFO: RESOURCES=ALLOCATED\n",
        "INFO: SCHEDULED AT=Now\n",
        "INFO: =============================\n",
    );
    assert_eq!(o.stdout, want);
    assert!(o.stdout.ends_with(ALLOCATED));
}

#[test]
fn no_match_unsatisfiable_and_job_numbering() {
    let o = run_script(
        "tiny.R.json",
        &[],
        &[
            "match allocate @node-x2.yaml",
            "match allocate @node-x2.yaml",
            // Both remaining nodes are taken: no match now, job id 3 used.
            "match allocate @node-x2.yaml",
            "match allocate_with_satisfiability @core9.yaml",
            "match satisfiability @core9.yaml",
            "match satisfiability @slot-core8.yaml",
            "info 3",
            "info 2",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stdout);
    let tail: Vec<&str> = o.stdout.lines().skip(12).take(15).collect();
    assert_eq!(
        tail,
        [
            "INFO: =============================",
            "INFO: No matching resources found",
            "INFO: JOBID=3",
            "INFO: =============================",
            "INFO: =============================",
            "INFO: No matching resources found",
            "INFO: Unsatisfiable request",
            "INFO: JOBID=4",
            "INFO: =============================",
            "INFO: =============================",
            "INFO: Unsatisfiable request",
            "INFO: =============================",
            "INFO: =============================",
            "INFO: Satisfiable request",
            "INFO: =============================",
        ][..],
        "{}",
        o.stdout
    );
    // Only matched jobs are known; info of job 2 goes last.
    let last = o.stdout.lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!(
            "INFO: 2, ALLOCATED, 0, {}, ",
            data("node-x2.yaml")
        )),
        "{last}"
    );
    assert_eq!(o.stderr, "ERROR: nonexistent job 3\n");
}

#[test]
fn free_info_list_and_reuse() {
    let o = run_script(
        "tiny.R.json",
        &["--json"],
        &[
            "match allocate @node-x2.yaml",
            "match allocate @node-x2.yaml",
            "free 1",
            "cancel 1",
            "info 1",
            "match allocate @node-x2.yaml",
            "list",
        ],
    );
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "");
    let v = values(&o);
    assert_eq!(v.len(), 7, "{}", o.stdout);
    assert_eq!(v[0]["jobid"], 1);
    assert_eq!(v[0]["status"], "ALLOCATED");
    assert_eq!(v[0]["R"]["execution"]["nodelist"], json!(["tiny[0-1]"]));
    assert_eq!(v[1]["R"]["execution"]["nodelist"], json!(["tiny[2-3]"]));
    assert_eq!(
        v[2],
        json!({"command":"free","jobid":1,"status":"CANCELED"})
    );
    assert_eq!(
        v[3],
        json!({"command":"cancel 1","error":"nonexistent job 1"})
    );
    assert_eq!(v[4]["status"], "CANCELED");
    // The freed nodes are used again by job 3.
    assert_eq!(v[5]["jobid"], 3);
    assert_eq!(v[5]["R"]["execution"]["nodelist"], json!(["tiny[0-1]"]));
    let states: Vec<(u64, String)> = v[6]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["jobid"].as_u64().unwrap(),
                j["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (1, "CANCELED".to_string()),
            (2, "ALLOCATED".into()),
            (3, "ALLOCATED".into())
        ]
    );
}

#[test]
fn find_expressions() {
    let tiny = data("tiny.R.json");
    let o = run_script(
        "tiny.R.json",
        &["--json"],
        &[
            "match allocate @node-x2.yaml",
            "set-status /cluster0/tiny3 down",
            "find status=down",
            "find property=gpu-a100",
            "find type=node and sched-now=allocated",
            "find property=gpu-a100 and sched-now=allocated",
            "find status=sideways",
        ],
    );
    let v = values(&o);
    assert_eq!(v[2]["R"]["execution"]["nodelist"], json!(["tiny3"]));
    assert_eq!(
        v[2]["R"]["execution"]["R_lite"],
        json!([{"rank":"3","children":{"gpu":"0-1","core":"0-7"}}])
    );
    assert_eq!(v[3]["R"]["execution"]["nodelist"], json!(["tiny[2-3]"]));
    assert_eq!(v[4]["R"]["execution"]["nodelist"], json!(["tiny[0-1]"]));
    assert_eq!(v[5]["R"], Value::Null);
    assert_eq!(v[5]["count"], 0);
    assert!(v[6]["error"]
        .as_str()
        .unwrap()
        .starts_with("find expression:"));
    assert_eq!(o.code, 1);

    // Text form: the R then the expression banner; nothing for no match.
    let o = run(
        &["-L", &tiny, "find", "property=ssd", "and", "status=down"],
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "INFO: =============================\nINFO: EXPRESSION=\"property=ssd and status=down\"\nINFO: =============================\n"
    );
}

#[test]
fn constraints_and_gpus() {
    let tiny = data("tiny.R.json");
    let o = run(
        &[
            "-L",
            &tiny,
            "-c",
            &format!("match allocate {}", data("a100-node.yaml")),
            "-c",
            &format!("match allocate {}", data("slot-core2-gpu.json")),
            "-c",
            "aggregate /cluster0/tiny2",
        ],
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let r1: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        r1["execution"]["R_lite"],
        json!([{"rank":"2","children":{"gpu":"0-1","core":"0-3"}}])
    );
    let r2: Value = serde_json::from_str(lines[6]).unwrap();
    // Two slots of 2 cores + 1 gpu pack onto the first node.
    assert_eq!(
        r2["execution"]["R_lite"],
        json!([{"rank":"0","children":{"gpu":"0-1","core":"0-3"}}])
    );
    assert_eq!(r2["execution"]["expiration"], json!(60.0));
    assert_eq!(&lines[12..], ["core: 4", "node: 1"]);
}

#[test]
fn scheduling_key_and_reload() {
    let o = run_script(
        "tiny.R.json",
        &["-F", "rv1"],
        &["match allocate @slot-core8.yaml"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: Value = serde_json::from_str(o.stdout.lines().next().unwrap()).unwrap();
    let nodes = r["scheduling"]["graph"]["nodes"].as_array().unwrap();
    // cluster, node, 8 cores; the cores are held wholly.
    assert_eq!(nodes.len(), 10);
    assert_eq!(nodes[2]["metadata"]["exclusive"], json!(true));
    assert_eq!(
        nodes[2]["metadata"]["paths"]["containment"],
        "/cluster0/tiny0/core0"
    );
    // The allocated R (with its JGF) loads as a graph of its own.
    let dir = std::env::temp_dir().join(format!("roster-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("alloc.json");
    std::fs::write(&f, o.stdout.lines().next().unwrap()).unwrap();
    let fs = f.to_str().unwrap();
    let o = run(&["-L", fs, "aggregate"], "");
    assert_eq!(o.stdout, "cluster: 1\ncore: 8\nnode: 1\n");
    let o = run(&["-L", fs, "-f", "rv1exec", "aggregate"], "");
    assert_eq!(o.stdout, "cluster: 1\ncore: 8\nnode: 1\n");
    // -S is --format rv1.
    let o = run_script("tiny.R.json", &["-S"], &["match allocate @slot-core8.yaml"]);
    let r2: Value = serde_json::from_str(o.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(r2, r);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sorted edges as (source, target) pairs.
fn edges(v: &Value) -> Vec<(String, String)> {
    let mut e: Vec<(String, String)> = v["graph"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_string(),
                e["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    e.sort();
    e
}

#[test]
fn fluxion_jgf_is_read_and_written_back() {
    let compact: Value =
        serde_json::from_str(&std::fs::read_to_string(data("fluke.jgf.json")).unwrap()).unwrap();
    let mut outs = Vec::new();
    for f in ["fluke.verbose.jgf.json", "fluke.jgf.json"] {
        let o = run(&["-L", &data(f), "-F", "jgf", "copy"], "");
        assert_eq!(o.code, 0, "{f}: {}", o.stderr);
        let out: Value = serde_json::from_str(o.stdout.trim_end()).unwrap();
        // Every RFC 20 key written (Fluxion's compact input leaves the
        // defaults out), with the values the input gave; edges are a set.
        model::jgf::check_rfc20(&out).unwrap_or_else(|e| panic!("{f}: {e}"));
        let nodes = out["graph"]["nodes"].as_array().unwrap();
        let given = compact["graph"]["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), given.len(), "{f}");
        for (n, g) in nodes.iter().zip(given) {
            assert_eq!(n["id"], g["id"], "{f}");
            for (k, v) in g["metadata"].as_object().unwrap() {
                assert_eq!(&n["metadata"][k], v, "{f}: {k} of {}", g["id"]);
            }
        }
        assert_eq!(edges(&out), edges(&compact), "{f}");
        outs.push(out);
    }
    assert_eq!(outs[0], outs[1]);
    let v = json_lines(
        "fluke.jgf.json",
        &[],
        &[
            "match allocate @a100-node.yaml",
            "find property=gpu-a100",
            "aggregate /cluster0/fluke1/socket0",
        ],
    );
    assert_eq!(
        v[0]["R"]["execution"]["R_lite"],
        json!([{"rank":"1","children":{"gpu":"0-1","core":"0-3"}}])
    );
    assert_eq!(v[0]["R"]["execution"]["nodelist"], json!(["fluke1"]));
    assert_eq!(v[1]["count"], 14);
    // Cores 0-3 are all on socket 0; gpu0 too.
    assert_eq!(v[2]["aggregate"], json!({"socket": 1}));
}

#[test]
fn hwloc_xml_loads_with_sockets() {
    let v = json_lines(
        "tiny7.xml",
        &["--rank", "5"],
        &[
            "aggregate",
            "get-status /cluster0/tiny7/socket1/gpu1",
            "match allocate @slot-core2-gpu.json",
        ],
    );
    assert_eq!(
        v[0]["aggregate"],
        json!({"cluster":1,"core":8,"gpu":2,"node":1,"socket":2})
    );
    assert_eq!(v[1]["status"], "up");
    assert_eq!(
        v[2]["R"]["execution"]["R_lite"],
        json!([{"rank":"5","children":{"gpu":"0-1","core":"0-3"}}])
    );
    assert_eq!(v[2]["R"]["execution"]["nodelist"], json!(["tiny7"]));
}

#[test]
fn copy_attach_remove() {
    let v = json_lines(
        "tiny.R.json",
        &[],
        &[
            "match allocate @node-x2.yaml",
            "copy",
            "remove /cluster0/tiny3",
            "aggregate",
            "attach @tiny7.xml",
            "aggregate",
            "get-property /cluster0/tiny0",
        ],
    );
    // The copy holds the two free nodes only.
    assert_eq!(v[1]["R"]["execution"]["nodelist"], json!(["tiny[2-3]"]));
    assert_eq!(v[2]["removed"], 11);
    assert_eq!(
        v[3]["aggregate"],
        json!({"cluster":1,"core":8,"gpu":2,"node":1})
    );
    // cluster0 is merged, its 13 descendants added.
    assert_eq!(v[4]["added"], 13);
    assert_eq!(
        v[5]["aggregate"],
        json!({"cluster":1,"core":16,"gpu":4,"node":2,"socket":2})
    );
    assert_eq!(v[6]["properties"], json!({"ssd": ""}));
}

#[test]
fn errors_are_reported_and_processing_continues() {
    let o = run_script(
        "tiny.R.json",
        &[],
        &[
            "match allocate @bad.yaml",
            "match allocate /nonexistent/js.yaml",
            "match reserve @slot-core8.yaml",
            "match allocate",
            "frobnicate",
            "aggregate /cluster0/nope",
            "match allocate @slot-core8.yaml",
            "quit",
            "match allocate @slot-core8.yaml",
        ],
    );
    assert_eq!(o.code, 1);
    let err: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(err.len(), 6, "{}", o.stderr);
    assert!(
        err[0].starts_with(&format!(
            "ERROR: {}: jobspec: invalid YAML: did not find expected ',' or ']' at line 6 column 1",
            data("bad.yaml")
        )),
        "{}",
        err[0]
    );
    assert_eq!(
        err[1],
        "ERROR: can't open /nonexistent/js.yaml: No such file or directory (os error 2)"
    );
    assert_eq!(err[2], "ERROR: unknown subcmd reserve");
    assert_eq!(
        err[3],
        "ERROR: malformed command: usage: match allocate|allocate_with_satisfiability|satisfiability JOBSPEC"
    );
    assert_eq!(err[4], "ERROR: unknown command 'frobnicate' (try 'help')");
    assert_eq!(err[5], "ERROR: no resource at '/cluster0/nope'");
    // Failed commands used no job id; quit stopped the rest.
    assert!(o.stdout.contains("INFO: JOBID=1\n"));
    assert_eq!(o.stdout.matches("JOBID").count(), 1);
}

#[test]
fn load_errors_and_usage() {
    let o = run(&["aggregate"], "");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster graph: nothing to load: give --load FILE or --local\n"
    );
    let o = run(&["-L", "/nonexistent.json", "stat"], "");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster graph: /nonexistent.json: No such file or directory (os error 2)\n"
    );
    let bad = data("bad.yaml");
    let o = run(&["-L", &bad, "stat"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.starts_with(&format!(
            "roster graph: {bad}: not JSON (R or JGF) nor XML (hwloc): "
        )),
        "{}",
        o.stderr
    );
    let o = run(&["--bogus"], "");
    assert_eq!(o.code, 2);
    let o = run(&["--help"], "");
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("match (m) allocate"), "{}", o.stdout);
}

#[test]
fn local_machine_loads() {
    let o = run(&["--local", "--json", "aggregate"], "");
    if o.code != 0 {
        // Discovery can fail in unusual sandboxes; the message says why.
        assert!(o
            .stderr
            .starts_with("roster graph: discovering this machine: "));
        return;
    }
    let v: Value = serde_json::from_str(o.stdout.trim_end()).unwrap();
    assert_eq!(v["aggregate"]["node"], 1);
    assert!(v["aggregate"]["core"].as_u64().unwrap_or(0) >= 1);
}

#[test]
fn stat_counts() {
    let o = run_script(
        "tiny.R.json",
        &[],
        &["match allocate @slot-core8.yaml", "stat"],
    );
    let stat: Vec<&str> = o.stdout.lines().skip(6).collect();
    assert_eq!(stat[0], "INFO: Num. of Vertices: 45");
    assert_eq!(stat[1], "INFO: Num. of Edges: 44");
    assert_eq!(stat[2], "INFO: Num. of Jobs Matched: 1");
    assert!(stat[3].starts_with("INFO: Min. Match Time: "));
    assert_eq!(stat.len(), 6);
}

/// Run `roster graph -L FILE --json OPTS` on a script, which must
/// succeed: one JSON value per command.
fn json_lines(file: &str, opts: &[&str], lines: &[&str]) -> Vec<Value> {
    let o = run_script(file, &[&["--json"][..], opts].concat(), lines);
    assert_eq!(o.code, 0, "{file}: {}", o.stderr);
    values(&o)
}

/// The allocation R's `scheduling` JGF carries every RFC 20 key, and
/// `roster graph` reads that R back to the same JGF.
fn scheduling_round_trips(r: &Value) {
    let jgf = &r["scheduling"];
    model::jgf::check_rfc20(jgf).unwrap();
    let dir = std::env::temp_dir().join(format!("roster-gcli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("r-{}.json", r["execution"]["nodelist"][0]));
    std::fs::write(&path, r.to_string()).unwrap();
    let o = run(&["-L", path.to_str().unwrap(), "-F", "jgf", "copy"], "");
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let back: Value = serde_json::from_str(o.stdout.trim_end()).unwrap();
    assert_eq!(back["graph"]["nodes"], jgf["graph"]["nodes"]);
    assert_eq!(edges(&back), edges(jgf));
}

/// Fluxion's power-subsystem shape (our own fixture): the default
/// aggregate counts what its root /power0 contains, not the vertices only
/// in the power subsystem (issue 26, item 7).
#[test]
fn power_subsystem_graph() {
    let v = json_lines(
        "power.jgf.json",
        &["-F", "rv1"],
        &[
            "aggregate",
            "aggregate /power0",
            "match allocate @node1.yaml",
            "duplicate",
        ],
    );
    let want = json!({"cluster": 1, "rack": 1, "pdu": 1, "node": 2, "core": 4});
    assert_eq!(
        (&v[0]["path"], &v[0]["aggregate"]),
        (&json!("/power0"), &want)
    );
    assert_eq!(v[1]["aggregate"], want);
    let r = &v[2]["R"];
    assert_eq!(
        r["execution"]["R_lite"][0]["children"],
        json!({"core": "0"})
    );
    scheduling_round_trips(r);
    // the full form (save, duplicate, --follow snapshots) too, power edges included
    let full = &v[3]["jgf"];
    model::jgf::check_rfc20(full).unwrap();
    let power: Vec<&Value> = full["graph"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["metadata"]["subsystem"] == "power")
        .collect();
    assert_eq!(power.len(), 5);
    assert!(power
        .iter()
        .all(|e| e["metadata"]["relationship"] == "supplies_to"));
}

/// A rabbit (near-node storage) chassis in Fluxion's shape: SSDs and
/// memory stay in the graph and out of R_lite (RFC 20 names core and
/// gpu); an elastic attach of a new rank's node is written back in full.
#[test]
fn rabbit_graph_and_elastic_attach() {
    let v = json_lines(
        "rabbit.jgf.json",
        &["-F", "rv1"],
        &[
            "aggregate",
            "match allocate @slot-core2-gpu1.json",
            "attach @elastic-rc12.jgf.json /cluster0/chassis0",
            "aggregate",
            "match allocate @node1.yaml",
            "duplicate",
        ],
    );
    assert_eq!(
        v[0]["aggregate"],
        json!({"chassis": 1, "cluster": 1, "core": 4, "gpu": 1, "memory": 128, "node": 2,
               "rabbit": 1, "socket": 2, "ssd": 1024})
    );
    let r = &v[1]["R"];
    assert_eq!(
        r["execution"]["R_lite"],
        json!([{"rank": "1", "children": {"core": "0-1", "gpu": "0"}}])
    );
    assert_eq!(r["execution"]["nodelist"], json!(["rc11"]));
    scheduling_round_trips(r);
    assert_eq!(v[2]["added"], 3);
    // rc12 attached (2 cores), rc11's 2 cores and GPU allocated
    assert_eq!(v[3]["aggregate"]["node"], 3, "{}", v[3]);
    assert_eq!(v[3]["aggregate"]["core"], 4, "{}", v[3]);
    assert_eq!(v[3]["aggregate"].get("gpu"), None, "{}", v[3]);
    let r = &v[4]["R"];
    assert_eq!(r["execution"]["nodelist"], json!(["rc10"]));
    let full = &v[5]["jgf"];
    model::jgf::check_rfc20(full).unwrap();
    let rc12 = full["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["metadata"]["name"] == "rc12")
        .expect("attached node written");
    assert_eq!(rc12["metadata"]["rank"], 2);
    assert_eq!(
        rc12["metadata"]["paths"],
        json!({"containment": "/cluster0/chassis0/rc12"})
    );
}

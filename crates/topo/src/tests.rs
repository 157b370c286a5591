//! Tests for XML and sysfs discovery.  The XML fixtures are small documents
//! written for these tests in the shapes `lstopo` produces (v2 from hwloc
//! 2.x, v1 from hwloc 1.11 and from hwloc 2 with `--export-xml-flags v1`).

use super::*;

fn ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap()
}

/// The topology flux would be told of: hostname, cores and GPUs.
fn topo(hostname: Option<&str>, cores: &str, gpus: &str) -> Topology {
    Topology {
        hostname: hostname.map(str::to_string),
        cores: ids(cores),
        gpus: ids(gpus),
    }
}

/// A v2 document: `npkg` packages of `ncores` cores (2 PUs each), then the
/// given I/O subtree (already-formatted XML) under the Machine.
fn v2_doc(npkg: u32, ncores: u32, host: Option<&str>, io: &str) -> String {
    let total = npkg * ncores;
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n",
    );
    let all = cpuset_of(&(0..total * 2).collect::<Vec<_>>());
    s += &format!(
        "  <object type=\"Machine\" os_index=\"0\" cpuset=\"{all}\" complete_cpuset=\"{all}\" allowed_cpuset=\"{all}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" gp_index=\"1\">\n"
    );
    s += "    <info name=\"Backend\" value=\"Linux\"/>\n";
    if let Some(h) = host {
        s += &format!("    <info name=\"HostName\" value=\"{h}\"/>\n");
    }
    let mut gp = 2;
    for p in 0..npkg {
        let pus: Vec<u32> = (p * ncores..(p + 1) * ncores)
            .flat_map(|c| [c, c + total])
            .collect();
        let pcs = cpuset_of(&pus);
        s += &format!(
            "    <object type=\"Package\" os_index=\"{p}\" cpuset=\"{pcs}\" complete_cpuset=\"{pcs}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"{gp}\">\n"
        );
        gp += 1;
        if p == 0 {
            s += &format!(
                "      <object type=\"NUMANode\" os_index=\"0\" cpuset=\"{all}\" complete_cpuset=\"{all}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"{gp}\" local_memory=\"1000\"/>\n"
            );
            gp += 1;
        }
        for c in p * ncores..(p + 1) * ncores {
            let cs = cpuset_of(&[c, c + total]);
            s += &format!(
                "      <object type=\"L2Cache\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"{gp}\" cache_size=\"1048576\" depth=\"2\" cache_linesize=\"64\" cache_associativity=\"8\" cache_type=\"0\">\n"
            );
            gp += 1;
            s += &format!(
                "        <object type=\"Core\" os_index=\"{c}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"{gp}\">\n"
            );
            gp += 1;
            for pu in [c, c + total] {
                let ps = cpuset_of(&[pu]);
                s += &format!(
                    "          <object type=\"PU\" os_index=\"{pu}\" cpuset=\"{ps}\" complete_cpuset=\"{ps}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"{gp}\"/>\n"
                );
                gp += 1;
            }
            s += "        </object>\n      </object>\n";
        }
        s += "    </object>\n";
    }
    s += io;
    s += "  </object>\n</topology>\n";
    s
}

/// hwloc bitmap string for a set of bits.
fn cpuset_of(bits: &[u32]) -> String {
    let max = bits.iter().copied().max().unwrap_or(0);
    let nchunks = (max / 32 + 1) as usize;
    let mut chunks = vec![0u32; nchunks];
    for &b in bits {
        chunks[(b / 32) as usize] |= 1 << (b % 32);
    }
    chunks
        .iter()
        .rev()
        .map(|c| format!("0x{c:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A v2 NVIDIA PCI device with the given OS devices (name, subtype, osdev_type, backend).
fn v2_pci(busid: &str, class: &str, osdevs: &[(&str, &str, u32, Option<&str>)]) -> String {
    let mut s = format!(
        "    <object type=\"PCIDev\" gp_index=\"900\" pci_busid=\"{busid}\" pci_type=\"{class} [10de:1db1] [10de:1212] a1\" pci_link_speed=\"15.753846\">\n      <info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/>\n"
    );
    for (name, subtype, t, backend) in osdevs {
        s += &format!(
            "      <object type=\"OSDev\" gp_index=\"901\" name=\"{name}\" subtype=\"{subtype}\" osdev_type=\"{t}\">\n"
        );
        if let Some(b) = backend {
            s += &format!("        <info name=\"Backend\" value=\"{b}\"/>\n");
        }
        s += "        <info name=\"GPUVendor\" value=\"NVIDIA Corporation\"/>\n      </object>\n";
    }
    s += "    </object>\n";
    s
}

fn bridge(inner: &str) -> String {
    format!(
        "    <object type=\"Bridge\" gp_index=\"800\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[00-ff]\">\n{inner}    </object>\n"
    )
}

/// Four V100-like cards, each seen by CUDA, NVML and OpenCL (plus DRM devices).
fn nvidia_io(ncards: usize) -> String {
    let mut inner = String::new();
    for i in 0..ncards {
        let busid = format!("0035:0{i}:00.0");
        let cuda = format!("cuda{i}");
        let nvml = format!("nvml{i}");
        let ocl = format!("opencl0d{i}");
        let card = format!("card{i}");
        inner += &v2_pci(
            &busid,
            "0302",
            &[
                (&card, "Display", 1, None),
                (&cuda, "CUDA", 5, Some("CUDA")),
                (&nvml, "NVML", 1, Some("NVML")),
                (&ocl, "OpenCL", 5, Some("OpenCL")),
            ],
        );
    }
    bridge(&inner)
}

#[test]
fn xml_v2_nvidia_sierra_like() {
    // sierra.xml upstream: core[0-43],gpu[0-3]; here 2 x 22 cores and 4 cards.
    let doc = v2_doc(2, 22, Some("sierra4321"), &nvidia_io(4));
    let t = from_hwloc_xml(&doc).unwrap();
    assert_eq!(t, topo(Some("sierra4321"), "0-43", "0-3"));
}

#[test]
fn xml_v2_missing_hostname_and_no_gpus() {
    let t = from_hwloc_xml(&v2_doc(1, 4, None, "")).unwrap();
    assert_eq!(t, topo(None, "0-3", ""));
}

/// An OS device of [`v2_pci`]: name, subtype, osdev_type, backend.
type OsDev<'a> = (&'a str, &'a str, u32, Option<&'a str>);

/// The GPUs of a 2-core v2 document whose only I/O is one PCI device
/// (`busid`, `class`) under a bridge, holding `osdevs`.
fn gpus_of_one_pci(busid: &str, class: &str, osdevs: &[OsDev]) -> IdSet {
    let io = bridge(&v2_pci(busid, class, osdevs));
    from_hwloc_xml(&v2_doc(1, 2, None, &io)).unwrap().gpus
}

#[test]
fn xml_gpu_dedup_rules() {
    let cases: [(&str, &str, &[OsDev], &str); 4] = [
        (
            "NVML listed before CUDA on the same card: still one GPU",
            "0302",
            &[
                ("nvml0", "NVML", 1, Some("NVML")),
                ("cuda0", "CUDA", 5, Some("CUDA")),
            ],
            "0",
        ),
        (
            "several devices with the same backend on one PCI device are \
             partitions: all count, but another backend on that device does not",
            "1200",
            &[
                ("rsmi0", "RSMI", 1, Some("RSMI")),
                ("rsmi1", "RSMI", 1, Some("RSMI")),
                ("rsmi2", "RSMI", 1, Some("RSMI")),
                ("opencl0d0", "OpenCL", 5, Some("OpenCL")),
            ],
            "0-2",
        ),
        (
            "OpenCL first: the RSMI views of that card are then duplicates",
            "0380",
            &[
                ("opencl0d0", "OpenCL", 5, Some("OpenCL")),
                ("rsmi0", "RSMI", 1, Some("RSMI")),
                ("rsmi1", "RSMI", 1, Some("RSMI")),
            ],
            "0",
        ),
        (
            "backends other than the four, or none at all (subtype alone), \
             do not count",
            "0300",
            &[
                ("card0", "Display", 1, None),
                ("cuda0", "CUDA", 5, None),
                ("ze0", "LevelZero", 5, Some("LevelZero")),
                ("gl0", "GL", 1, Some("GL")),
            ],
            "",
        ),
    ];
    for (what, class, osdevs, want) in cases {
        assert_eq!(
            gpus_of_one_pci("0000:01:00.0", class, osdevs),
            ids(want),
            "{what}"
        );
    }
}

#[test]
fn xml_gpus_need_a_pci_device() {
    // An OS device directly under the Machine, and no PCI device anywhere: none.
    let io = "    <object type=\"OSDev\" gp_index=\"700\" name=\"cuda0\" subtype=\"CUDA\" osdev_type=\"5\">\n      <info name=\"Backend\" value=\"CUDA\"/>\n    </object>\n";
    assert!(from_hwloc_xml(&v2_doc(1, 2, None, io))
        .unwrap()
        .gpus
        .is_empty());

    // With one PCI device elsewhere it counts (no PCI parent: never a duplicate),
    // and the table of seen devices (one slot per PCI device) is then full, so
    // the next card's CUDA and NVML views are both counted: 3, as hwloc does.
    let io = format!(
        "    <object type=\"OSDev\" gp_index=\"700\" name=\"cuda9\" subtype=\"CUDA\" osdev_type=\"5\">\n      <info name=\"Backend\" value=\"CUDA\"/>\n    </object>\n{}",
        bridge(&v2_pci(
            "0000:01:00.0",
            "0302",
            &[
                ("cuda0", "CUDA", 5, Some("CUDA")),
                ("nvml0", "NVML", 1, Some("NVML")),
            ],
        ))
    );
    assert_eq!(
        from_hwloc_xml(&v2_doc(1, 2, None, &io)).unwrap().gpus,
        ids("0-2")
    );
}

#[test]
fn xml_unimportant_pci_devices_are_filtered() {
    let cases: [(&str, &str, &str, OsDev); 3] = [
        (
            "a USB controller (class 0c03) is dropped on import: with no \
             other PCI device, its OS device gives no GPU",
            "0000:01:00.0",
            "0c03",
            ("cuda0", "CUDA", 5, Some("CUDA")),
        ),
        (
            "a malformed pci_busid makes hwloc ignore the object the same way",
            "bogus",
            "0302",
            ("cuda0", "CUDA", 5, Some("CUDA")),
        ),
        (
            "DMA OS devices (type 4) are not kept",
            "0000:01:00.0",
            "0302",
            ("dma0", "DMA", 4, Some("CUDA")),
        ),
    ];
    for (what, busid, class, osdev) in cases {
        let gpus = gpus_of_one_pci(busid, class, &[osdev]);
        assert!(gpus.is_empty(), "{what}: {gpus:?}");
    }
}

/// A v1 document shaped like hwloc 2.7's v1 export of an AMD node (corona):
/// NUMANode > Socket > caches > Core > PU, bridges under the NUMA node,
/// RSMI GPUs with `osdev_type="1"` and a `Type` info instead of `subtype`.
fn corona_like() -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n<topology>\n  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000ffff\" complete_cpuset=\"0x0000ffff\" online_cpuset=\"0x0000ffff\" allowed_cpuset=\"0x0000ffff\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\">\n    <page_type size=\"4096\" count=\"0\"/>\n    <info name=\"Backend\" value=\"Linux\"/>\n    <info name=\"HostName\" value=\"corona263\"/>\n    <distances nbobjs=\"2\" relative_depth=\"1\" latency_base=\"1.000000\">\n      <latency value=\"10.000000\"/>\n      <latency value=\"32.000000\"/>\n      <latency value=\"32.000000\"/>\n      <latency value=\"10.000000\"/>\n    </distances>\n",
    );
    let mut gpu = 0;
    for numa in 0..2u32 {
        let bits: Vec<u32> = (numa * 4..numa * 4 + 4).flat_map(|c| [c, c + 8]).collect();
        let cs = cpuset_of(&bits);
        s += &format!("    <object type=\"NUMANode\" os_index=\"{numa}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" online_cpuset=\"{cs}\" allowed_cpuset=\"{cs}\" nodeset=\"0x0000000{}\" complete_nodeset=\"0x0000000{}\" allowed_nodeset=\"0x0000000{}\" local_memory=\"134734184448\">\n", 1 << numa, 1 << numa, 1 << numa);
        s += "      <page_type size=\"4096\" count=\"32894088\"/>\n";
        s += &format!("      <object type=\"Socket\" os_index=\"{numa}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" online_cpuset=\"{cs}\" allowed_cpuset=\"{cs}\">\n        <info name=\"CPUVendor\" value=\"AuthenticAMD\"/>\n");
        for c in numa * 4..numa * 4 + 4 {
            let cc = cpuset_of(&[c, c + 8]);
            s += &format!("        <object type=\"Cache\" os_index=\"{c}\" cpuset=\"{cc}\" complete_cpuset=\"{cc}\" online_cpuset=\"{cc}\" allowed_cpuset=\"{cc}\" cache_size=\"32768\" depth=\"1\" cache_linesize=\"64\" cache_associativity=\"8\" cache_type=\"1\">\n");
            s += &format!("          <object type=\"Core\" os_index=\"{c}\" cpuset=\"{cc}\" complete_cpuset=\"{cc}\" online_cpuset=\"{cc}\" allowed_cpuset=\"{cc}\">\n");
            for pu in [c, c + 8] {
                let p = cpuset_of(&[pu]);
                s += &format!("            <object type=\"PU\" os_index=\"{pu}\" cpuset=\"{p}\" complete_cpuset=\"{p}\" online_cpuset=\"{p}\" allowed_cpuset=\"{p}\"/>\n");
            }
            s += "          </object>\n        </object>\n";
        }
        s += "      </object>\n";
        for _ in 0..2 {
            s += &format!("      <object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[a0-a7]\">\n        <object type=\"Bridge\" bridge_type=\"1-1\" depth=\"1\" bridge_pci=\"0000:[a1-a3]\" pci_busid=\"0000:a0:03.1\" pci_type=\"0604 [1022:1483] [1022:1453] 00\" pci_link_speed=\"31.507692\">\n          <object type=\"PCIDev\" pci_busid=\"0000:a{gpu}:00.0\" pci_type=\"0380 [1002:66a1] [1002:0834] 02\" pci_link_speed=\"31.000000\">\n            <object type=\"OSDev\" name=\"rsmi{gpu}\" osdev_type=\"1\">\n              <info name=\"Backend\" value=\"RSMI\"/>\n              <info name=\"GPUVendor\" value=\"AMD\"/>\n              <info name=\"Type\" value=\"RSMI\"/>\n            </object>\n          </object>\n        </object>\n      </object>\n");
            gpu += 1;
        }
        s += "    </object>\n";
    }
    s += "    <object type=\"OSDev\" name=\"sda\" osdev_type=\"0\">\n      <info name=\"Type\" value=\"Disk\"/>\n    </object>\n  </object>\n</topology>\n";
    s
}

#[test]
fn xml_v1_amd_corona_like() {
    let t = from_hwloc_xml(&corona_like()).unwrap();
    assert_eq!(t, topo(Some("corona263"), "0-7", "0-3"));
}

#[test]
fn xml_v1_hwloc1_cuda() {
    // hwloc 1.11 shape: CoProcType + Backend on "cudaN" (osdev_type 5), DRM
    // devices without a backend beside it, "Package" and "Group" objects.
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n<topology>\n  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" online_cpuset=\"0x000000ff\" allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\">\n    <info name=\"HostName\" value=\"sierra3179\"/>\n    <object type=\"Group\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" online_cpuset=\"0x000000ff\" allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" depth=\"0\">\n      <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" online_cpuset=\"0x000000ff\" allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" local_memory=\"137132310528\">\n        <object type=\"Package\" os_index=\"0\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" online_cpuset=\"0x000000ff\" allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\">\n");
    for c in 0..2u32 {
        let cs = if c == 0 { "0x0000000f" } else { "0x000000f0" };
        s += &format!("          <object type=\"Core\" os_index=\"{}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" online_cpuset=\"{cs}\" allowed_cpuset=\"{cs}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\">\n", 8 + 4 * c);
        for pu in c * 4..c * 4 + 4 {
            let p = cpuset_of(&[pu]);
            s += &format!("            <object type=\"PU\" os_index=\"{pu}\" cpuset=\"{p}\" complete_cpuset=\"{p}\" online_cpuset=\"{p}\" allowed_cpuset=\"{p}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\"/>\n");
        }
        s += "          </object>\n";
    }
    s += "        </object>\n";
    for g in 0..2 {
        s += &format!("        <object type=\"Bridge\" os_index=\"11\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0035:[00-09]\">\n          <object type=\"PCIDev\" os_index=\"5558681{g}\" name=\"NVIDIA Corporation GV100GL [Tesla V100 SXM2]\" pci_busid=\"0035:0{g}:00.0\" pci_type=\"0302 [10de:1db1] [10de:1212] a1\" pci_link_speed=\"0.000000\">\n            <info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/>\n            <object type=\"OSDev\" name=\"card{g}\" osdev_type=\"1\"/>\n            <object type=\"OSDev\" name=\"renderD12{g}\" osdev_type=\"1\"/>\n            <object type=\"OSDev\" name=\"cuda{g}\" osdev_type=\"5\">\n              <info name=\"CoProcType\" value=\"CUDA\"/>\n              <info name=\"Backend\" value=\"CUDA\"/>\n              <info name=\"GPUModel\" value=\"Tesla V100-SXM2-16GB\"/>\n            </object>\n          </object>\n        </object>\n");
    }
    s += "      </object>\n    </object>\n  </object>\n</topology>\n";
    let t = from_hwloc_xml(&s).unwrap();
    assert_eq!(t, topo(Some("sierra3179"), "0-1", "0-1"));
}

#[test]
fn xml_v2_amd_cpx_partitions() {
    // MI300A in CPX mode: 6 RSMI devices per PCI device, 2 devices.
    let mut inner = String::new();
    for d in 0..2 {
        inner += &format!("    <object type=\"PCIDev\" gp_index=\"84{d}\" pci_busid=\"000{d}:02:00.0\" pci_type=\"1200 [1002:74a0] [1002:74a0] 00\" pci_link_speed=\"63.015385\">\n");
        for p in 0..6 {
            inner += &format!("      <object type=\"OSDev\" gp_index=\"9{d}{p}\" name=\"rsmi{}\" subtype=\"RSMI\" osdev_type=\"1\">\n        <info name=\"Backend\" value=\"RSMI\"/>\n      </object>\n", d * 6 + p);
        }
        inner += "    </object>\n";
    }
    let t = from_hwloc_xml(&v2_doc(2, 3, Some("tuo"), &bridge(&inner))).unwrap();
    assert_eq!(t, topo(Some("tuo"), "0-5", "0-11"));
}

#[test]
fn xml_synthetic_numa2_core3_pu1() {
    // What `lstopo -i "numa:2 core:3 pu:1" --of xml` looks like: Groups holding
    // a NUMA node (memory child) and three single-PU cores each.
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000003f\" complete_cpuset=\"0x0000003f\" allowed_cpuset=\"0x0000003f\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\" gp_index=\"1\">\n    <info name=\"SyntheticDescription\" value=\"numa:2 core:3 pu:1\"/>\n");
    for g in 0..2u32 {
        let gs = if g == 0 { "0x00000007" } else { "0x00000038" };
        let ns = 1 << g;
        s += &format!("    <object type=\"Group\" cpuset=\"{gs}\" complete_cpuset=\"{gs}\" nodeset=\"0x0000000{ns}\" complete_nodeset=\"0x0000000{ns}\" gp_index=\"{}\" kind=\"1000\" subkind=\"0\">\n      <object type=\"NUMANode\" os_index=\"{g}\" cpuset=\"{gs}\" complete_cpuset=\"{gs}\" nodeset=\"0x0000000{ns}\" complete_nodeset=\"0x0000000{ns}\" gp_index=\"{}\" local_memory=\"0\"/>\n", 10 + g, 20 + g);
        for c in g * 3..g * 3 + 3 {
            let cs = cpuset_of(&[c]);
            s += &format!("      <object type=\"Core\" os_index=\"{c}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" nodeset=\"0x0000000{ns}\" complete_nodeset=\"0x0000000{ns}\" gp_index=\"{}\">\n        <object type=\"PU\" os_index=\"{c}\" cpuset=\"{cs}\" complete_cpuset=\"{cs}\" nodeset=\"0x0000000{ns}\" complete_nodeset=\"0x0000000{ns}\" gp_index=\"{}\"/>\n      </object>\n", 30 + c, 40 + c);
        }
        s += "    </object>\n";
    }
    s += "  </object>\n</topology>\n";
    let t = from_hwloc_xml(&s).unwrap();
    assert_eq!(t, topo(None, "0-5", ""));
}

#[test]
fn xml_allowed_cpuset_drops_cores() {
    // Root allowed_cpuset covers PUs 0-1 and 8 of a 8-core/16-PU machine
    // (core c has PUs c and c+8): cores 0 and 1 remain.
    let doc = v2_doc(1, 8, None, "").replacen(
        "allowed_cpuset=\"0x0000ffff\"",
        "allowed_cpuset=\"0x00000103\"",
        1,
    );
    assert!(doc.contains("0x00000103"));
    assert_eq!(from_hwloc_xml(&doc).unwrap().cores, ids("0-1"));
    // allowed_cpuset on non-root objects is ignored (v1 writes it everywhere)
    let t = from_hwloc_xml(&corona_like().replace(
        "<object type=\"Core\" os_index=\"0\" cpuset=\"0x00000101\" complete_cpuset=\"0x00000101\" online_cpuset=\"0x00000101\" allowed_cpuset=\"0x00000101\"",
        "<object type=\"Core\" os_index=\"0\" cpuset=\"0x00000101\" complete_cpuset=\"0x00000101\" online_cpuset=\"0x00000101\" allowed_cpuset=\"0x0\"",
    ))
    .unwrap();
    assert_eq!(t.cores, ids("0-7"));
    // A core with an empty cpuset is removed by hwloc.
    let doc = v2_doc(1, 4, None, "").replacen(
        "<object type=\"Core\" os_index=\"3\" cpuset=\"0x00000088\"",
        "<object type=\"Core\" os_index=\"3\" cpuset=\"0x0\"",
        1,
    );
    assert!(doc.contains("cpuset=\"0x0\""));
    assert_eq!(from_hwloc_xml(&doc).unwrap().cores, ids("0-2"));
}

fn xml_err(doc: &str) -> String {
    match from_hwloc_xml(doc) {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn xml_errors_name_the_problem_and_position() {
    let e = xml_err("<topology>\n  <object type=\"Machine\"\n</topology>");
    assert!(
        e.starts_with("hwloc XML syntax error at line 3, column 1:"),
        "{e}"
    );
    assert!(xml_err("").starts_with("hwloc XML syntax error at line 1"));
    assert!(xml_err("not xml").starts_with("hwloc XML syntax error"));

    let e = xml_err("<?xml version=\"1.0\"?>\n<lstopo/>");
    assert_eq!(
        e,
        "invalid hwloc XML topology at line 2, column 1: root element is <lstopo>, expected <topology>"
    );
    let e = xml_err("<topology>\n</topology>");
    assert!(e.ends_with("<topology> has no root <object>"), "{e}");
    let e = xml_err("<topology><info name=\"a\" value=\"b\"/></topology>");
    assert!(
        e.ends_with("expected the root <object>, found <info>"),
        "{e}"
    );

    let good = v2_doc(1, 2, None, "");
    let e = xml_err(&good.replacen("type=\"Core\"", "type=\"Kore\"", 1));
    assert!(e.contains("unrecognized object type 'Kore'"), "{e}");
    assert!(e.starts_with("invalid hwloc XML topology at line "), "{e}");
    let e = xml_err(&good.replacen(
        "<topology version=\"2.0\">",
        "<topology version=\"3.0\">",
        1,
    ));
    assert!(e.contains("cannot import XML version 3.x"), "{e}");
    // (the text replaced in a good document, its replacement, the error's end)
    let edits = [
        (
            "<object type=\"Core\" os_index=\"0\"",
            "<object os_index=\"0\" type=\"Core\"",
            "object attribute 'os_index' found before type",
        ),
        (
            "<object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\"",
            "<object type=\"PU\" os_index=\"0\"",
            "PU object without cpuset",
        ),
        (
            "nodeset=\"0x00000001\" complete_nodeset",
            "complete_nodeset",
            "root object without nodeset",
        ),
        (
            "<info name=\"Backend\" value=\"Linux\"/>",
            "<info name=\"Backend\" value=\"Linux\" extra=\"1\"/>",
            "unexpected attribute 'extra' in <info>",
        ),
        (
            "<info name=\"Backend\" value=\"Linux\"/>",
            "<foo/>",
            "unexpected <foo> in an object",
        ),
        // info after child objects
        (
            "  </object>\n</topology>",
            "    <info name=\"a\" value=\"b\"/>\n  </object>\n</topology>",
            "unexpected <info> after child objects",
        ),
    ];
    for (from, to, want) in edits {
        let e = xml_err(&good.replacen(from, to, 1));
        assert!(e.ends_with(want), "{from} -> {to}: {e}");
    }
    // an I/O object cannot carry a cpuset, nor hold normal objects
    let io = "    <object type=\"PCIDev\" cpuset=\"0x1\" pci_busid=\"0000:01:00.0\"/>\n";
    let e = xml_err(&v2_doc(1, 2, None, io));
    assert!(e.ends_with("PCIDev object with a cpuset"), "{e}");
    let io = "    <object type=\"PCIDev\" pci_busid=\"0000:01:00.0\"><object type=\"Core\" cpuset=\"0x1\"/></object>\n";
    let e = xml_err(&v2_doc(1, 2, None, io));
    assert!(
        e.ends_with("a normal object cannot be a child of an I/O object"),
        "{e}"
    );
}

#[test]
fn xml_never_panics_on_garbage() {
    // A few hostile shapes; the property test below covers random mutations.
    let deep = format!(
        "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\" nodeset=\"0x1\">{}{}</object></topology>",
        "<object type=\"Group\" cpuset=\"0x1\">".repeat(5000),
        "</object>".repeat(5000)
    );
    let e = from_hwloc_xml(&deep).unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid hwloc XML topology at line 1, column 8711: elements nested deeper than 256 levels"
    );
    // 255 levels below <topology> are fine
    let ok = format!(
        "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\" nodeset=\"0x1\">{}<object type=\"Core\" cpuset=\"0x1\"/>{}</object></topology>",
        "<object type=\"Group\" cpuset=\"0x1\">".repeat(254),
        "</object>".repeat(254)
    );
    assert_eq!(from_hwloc_xml(&ok).unwrap().cores, ids("0"));
    // nesting hidden from the scan behind quotes or comments is still counted right
    let tricky = format!(
        "<topology>{}</topology>",
        "<object type=\"/>\"><!-- </object> -->".repeat(300)
    );
    assert!(from_hwloc_xml(&tricky)
        .unwrap_err()
        .to_string()
        .contains("nested deeper"));
    let e = from_hwloc_xml("<!DOCTYPE topology [<!ENTITY a \"<x><x>\">]><topology>&a;</topology>")
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("DTD internal subsets are not supported"), "{e}");
    let huge_set = format!(
        "<topology><object type=\"Machine\" cpuset=\"{}\"><object type=\"Core\" cpuset=\"0xf...f\"/></object></topology>",
        vec!["0x55555555"; 3000].join(",")
    );
    assert_eq!(from_hwloc_xml(&huge_set).unwrap().cores, ids("0"));
    for doc in [
        "<topology><object type=\"\"/></topology>",
        "<topology><object/></topology>",
        "<topology><object type=\"Machine\" cpuset=\"\u{0}\"/></topology>",
        "<!DOCTYPE topology [<!ENTITY a \"&a;\">]><topology>&a;</topology>",
    ] {
        let _ = from_hwloc_xml(doc);
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        /// Random byte edits of a valid document never panic.
        #[test]
        fn mutated_documents_do_not_panic(edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..8)) {
            let mut doc = v2_doc(1, 3, Some("h"), &nvidia_io(2)).into_bytes();
            for (at, b) in edits {
                let i = at.index(doc.len());
                doc[i] = b;
            }
            let s = String::from_utf8_lossy(&doc);
            let _ = from_hwloc_xml(&s);
        }

        /// Core and GPU counts follow the document for any shape.
        #[test]
        fn counts_follow_the_document(npkg in 1u32..4, ncores in 1u32..6, ncards in 0usize..5) {
            let io = if ncards == 0 { String::new() } else { nvidia_io(ncards) };
            let t = from_hwloc_xml(&v2_doc(npkg, ncores, None, &io)).unwrap();
            prop_assert_eq!(t.cores.len(), u64::from(npkg * ncores));
            prop_assert_eq!(t.gpus.len(), ncards as u64);
        }
    }
}

// ---------------------------------------------------------------------------
// sysfs

struct FakeRoot {
    dir: tempfile::TempDir,
}

impl FakeRoot {
    fn new() -> Self {
        FakeRoot {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn write(&self, rel: &str, content: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    /// CPU `n` in `package`, sharing a core with `siblings` (a cpulist).
    fn cpu(&self, n: u32, package: u32, core_id: u32, siblings: &str) {
        let t = format!("sys/devices/system/cpu/cpu{n}/topology");
        self.write(&format!("{t}/physical_package_id"), &format!("{package}\n"));
        self.write(&format!("{t}/core_id"), &format!("{core_id}\n"));
        self.write(&format!("{t}/die_id"), "0\n");
        self.write(&format!("{t}/core_cpus_list"), &format!("{siblings}\n"));
        self.write(
            &format!("{t}/thread_siblings_list"),
            &format!("{siblings}\n"),
        );
    }
    fn online(&self, list: &str) {
        self.write("sys/devices/system/cpu/online", &format!("{list}\n"));
    }
    fn affinity(&self, list: &str) {
        self.write(
            "proc/self/status",
            &format!("Name:\ttest\nCpus_allowed:\tff\nCpus_allowed_list:\t{list}\nMems_allowed_list:\t0\n"),
        );
    }
    fn pci(&self, busid: &str, vendor: &str, class: &str, local: &str) {
        let d = format!("sys/bus/pci/devices/{busid}");
        self.write(&format!("{d}/vendor"), &format!("{vendor}\n"));
        self.write(&format!("{d}/class"), &format!("{class}\n"));
        self.write(&format!("{d}/local_cpulist"), &format!("{local}\n"));
    }
}

/// Two packages of 4 cores with 2 SMT threads each (Linux numbering: core c
/// of the machine has CPUs c and c+8).
fn two_socket_smt() -> FakeRoot {
    let r = FakeRoot::new();
    for c in 0..8u32 {
        let pkg = c / 4;
        let sib = format!("{},{}", c, c + 8);
        r.cpu(c, pkg, c % 4, &sib);
        r.cpu(c + 8, pkg, c % 4, &sib);
    }
    r.online("0-15");
    r.write("proc/sys/kernel/hostname", "node17\n");
    r
}

#[test]
fn sysfs_smt_siblings_count_once_over_two_packages() {
    let r = two_socket_smt();
    let t = discover_from_root(r.path()).unwrap();
    assert_eq!(t, topo(Some("node17"), "0-7", ""));
}

#[test]
fn sysfs_affinity_subset() {
    let r = two_socket_smt();
    // bound to both threads of cores 1 and 2, and one thread of core 5
    r.affinity("1-2,9-10,13");
    assert_eq!(discover_from_root(r.path()).unwrap().cores, ids("0-2"));
    // per-thread masks are unioned, as hwloc's process binding is
    r.write("proc/self/task/100/status", "Cpus_allowed_list:\t0\n");
    r.write("proc/self/task/101/status", "Cpus_allowed_list:\t7\n");
    assert_eq!(discover_from_root(r.path()).unwrap().cores, ids("0-1"));
}

#[test]
fn sysfs_affinity_outside_online_cpus_is_an_error() {
    let r = two_socket_smt();
    r.affinity("64-65");
    let e = discover_from_root(r.path()).unwrap_err().to_string();
    assert_eq!(e, "the CPU binding (64-65) contains no online CPU (0-15)");
}

#[test]
fn sysfs_offline_cpus() {
    let r = two_socket_smt();
    // both threads of core 3 offline, one thread of core 4 offline
    r.online("0-2,4-10,12-15");
    assert_eq!(discover_from_root(r.path()).unwrap().cores, ids("0-6"));
    // no online file: per-CPU "online" flags are used
    std::fs::remove_file(r.path().join("sys/devices/system/cpu/online")).unwrap();
    r.write("sys/devices/system/cpu/cpu3/online", "0\n");
    r.write("sys/devices/system/cpu/cpu11/online", "0\n");
    r.write("sys/devices/system/cpu/cpu4/online", "1\n");
    assert_eq!(discover_from_root(r.path()).unwrap().cores, ids("0-6"));
}

#[test]
fn sysfs_thread_siblings_fallback_and_missing_topology() {
    let r = FakeRoot::new();
    // older kernels: only thread_siblings_list
    for c in 0..2u32 {
        let t = format!("sys/devices/system/cpu/cpu{c}/topology");
        r.write(&format!("{t}/physical_package_id"), "0\n");
        r.write(&format!("{t}/thread_siblings_list"), "0-1\n");
    }
    // cpu2 has no topology directory at all: its own core
    r.write("sys/devices/system/cpu/cpu2/online", "1\n");
    r.online("0-2");
    let t = discover_from_root(r.path()).unwrap();
    assert_eq!(t, topo(None, "0-1", ""));
}

#[test]
fn sysfs_nvidia_gpu_pci_device() {
    let r = two_socket_smt();
    r.pci("0000:3b:00.0", "0x10de", "0x030200", "0-3,8-11");
    r.pci("0000:af:00.0", "0x10de", "0x030000", "4-7,12-15");
    // an NVSwitch (bridge class) and a NIC are not GPUs
    r.pci("0000:c0:00.0", "0x10de", "0x068000", "0-15");
    r.pci("0000:d0:00.0", "0x15b3", "0x020700", "0-15");
    assert_eq!(discover_from_root(r.path()).unwrap().gpus, ids("0-1"));
    // restricted to package 0: the GPU local to package 1 goes away
    r.affinity("0-3");
    let t = discover_from_root(r.path()).unwrap();
    assert_eq!(t, topo(Some("node17"), "0-3", "0"));
}

#[test]
fn sysfs_nvidia_proc_driver_fallback() {
    let r = two_socket_smt();
    r.write(
        "proc/driver/nvidia/gpus/0000:3b:00.0/information",
        "Model: x\n",
    );
    r.write(
        "proc/driver/nvidia/gpus/0000:5e:00.0/information",
        "Model: x\n",
    );
    assert_eq!(discover_from_root(r.path()).unwrap().gpus, ids("0-1"));
}

#[test]
fn sysfs_amd_kfd_nodes_and_pci_fallback() {
    let r = two_socket_smt();
    r.pci("0000:c1:00.0", "0x1002", "0x038000", "0-15");
    assert_eq!(discover_from_root(r.path()).unwrap().gpus, ids("0"));
    // KFD lists CPU nodes (simd_count 0) and one node per GPU partition
    let kfd = "sys/class/kfd/kfd/topology/nodes";
    r.write(
        &format!("{kfd}/0/properties"),
        "cpu_cores_count 16\nsimd_count 0\n",
    );
    for n in 1..=3 {
        r.write(
            &format!("{kfd}/{n}/properties"),
            "cpu_cores_count 0\nsimd_count 304\n",
        );
    }
    assert_eq!(discover_from_root(r.path()).unwrap().gpus, ids("0-2"));
}

#[test]
fn sysfs_errors_name_the_file() {
    let r = two_socket_smt();
    r.online("0-x");
    let e = discover_from_root(r.path()).unwrap_err().to_string();
    assert!(
        e.ends_with("sys/devices/system/cpu/online: invalid CPU list '0-x'"),
        "{e}"
    );
    let r = FakeRoot::new();
    let e = discover_from_root(r.path()).unwrap_err().to_string();
    assert!(
        e.ends_with("sys/devices/system/cpu: no online CPU found"),
        "{e}"
    );
}

#[test]
fn local_discovery_works_here() {
    // This machine: at least one core, ids dense, hostname as the kernel says.
    let t = discover_local().unwrap();
    assert!(!t.cores.is_empty());
    assert_eq!(t.cores.first(), Some(0));
    assert_eq!(t.cores.range_count(), 1);
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(t.hostname.as_deref(), Some(h.trim()));
}

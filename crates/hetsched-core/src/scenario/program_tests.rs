//! Reading programs: the kinds and their fields come from `ProgramPattern`,
//! and the messages name the field, the program, the kind and the kinds that
//! take a field.

use super::spec::kinds;
use super::*;

const HEAD: &str = "duration_s = 1\nmachine.preset = \"smp-4\"\n";

fn err(text: &str) -> String {
    match parse(text, "t.toml", Format::Toml, &[]) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn ok(text: &str) -> Scenario {
    parse(text, "t.toml", Format::Toml, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Two programs, the second of kind `kind` with `fields`.
fn second(kind: &str, fields: &str) -> String {
    format!(
        "{HEAD}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\n\
         [[workload.programs]]\nkind = \"{kind}\"\n{fields}"
    )
}

/// The fields each kind takes besides the shared ones: the table the
/// parser once kept by hand (`FIELD_KINDS`), now read from the type.
const EXPECTED: &[(&str, &[&str], &[&str])] = &[
    // (kind, fields, required fields)
    ("sequential", &["work_ms"], &["work_ms"]),
    ("parallel", &["iterations", "work_ms"], &["work_ms"]),
    ("dynamic", &["chunks", "work_ms"], &["chunks", "work_ms"]),
    (
        "fork_join",
        &["iterations", "seq_fraction", "work_ms"],
        &["work_ms"],
    ),
    (
        "pool",
        &["chunks", "io_ms", "work_ms"],
        &["chunks", "work_ms"],
    ),
    (
        "periodic",
        &["deadline_ms", "jobs", "period_ms", "wcet_ms"],
        &["period_ms", "wcet_ms"],
    ),
    (
        "phases",
        &["barrier_count", "forked", "loops", "phases"],
        &["phases"],
    ),
];

/// The smallest valid fields of each kind.
fn minimal(kind: &str) -> &'static str {
    match kind {
        "sequential" | "parallel" | "fork_join" => "work_ms = 10\n",
        "dynamic" | "pool" => "work_ms = 10\nchunks = 2\n",
        "periodic" => "period_ms = 10\nwcet_ms = 1\njobs = 2\n",
        "phases" => "phases = [{ compute_ms = 1 }]\n",
        other => panic!("no minimal program for {other}"),
    }
}

#[test]
fn the_kinds_and_their_fields_come_from_the_type() {
    let got: Vec<(String, Vec<String>, Vec<String>)> = kinds()
        .iter()
        .map(|k| {
            (
                k.name.clone(),
                k.fields.keys().cloned().collect(),
                k.required.iter().cloned().collect(),
            )
        })
        .collect();
    let want: Vec<(String, Vec<String>, Vec<String>)> = EXPECTED
        .iter()
        .map(|(k, f, r)| {
            (
                k.to_string(),
                f.iter().map(|s| s.to_string()).collect(),
                r.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(got, want);
    // `ProgramPattern::kind` names each variant as serde does.
    for (kind, _, _) in EXPECTED {
        let s = ok(&second(kind, minimal(kind)));
        assert_eq!(s.spec.workload.programs[1].pattern.kind(), *kind);
    }
}

#[test]
fn a_field_of_another_kind_names_program_kind_and_takers() {
    for (kind, own, _) in EXPECTED {
        for (other, fields, _) in EXPECTED {
            for f in fields.iter().filter(|f| !own.contains(f)) {
                let takers: Vec<&str> = EXPECTED
                    .iter()
                    .filter(|(_, fs, _)| fs.contains(f))
                    .map(|(k, _, _)| *k)
                    .collect();
                let value = if *f == "phases" {
                    "[{ sleep_ms = 1 }]"
                } else {
                    "3"
                };
                let e = err(&second(kind, &format!("{}{f} = {value}\n", minimal(kind))));
                let want = format!(
                    "workload.programs[1].{f}: not used by kind \"{kind}\" (used by: {})",
                    takers.join(", ")
                );
                assert!(e.contains(&want), "{other}: want {want}\ngot {e}");
            }
        }
    }
    // A guest program's path is the VM's.
    let vm = format!(
        "{HEAD}[[vms]]\nname = \"g\"\nvcpus = 2\n[[vms.programs]]\nkind = \"parallel\"\n\
         work_ms = 5\nperiod_ms = 3\n"
    );
    let e = err(&vm);
    assert!(
        e.contains(
            "vms[0].programs[0].period_ms: not used by kind \"parallel\" (used by: periodic)"
        ),
        "{e}"
    );
}

#[test]
fn missing_unknown_and_mistyped_fields_are_named() {
    for (kind, _, required) in EXPECTED {
        for r in required.iter() {
            let fields: String = minimal(kind)
                .lines()
                .filter(|l| !l.starts_with(&format!("{r} ")))
                .map(|l| format!("{l}\n"))
                .collect();
            let e = err(&second(kind, &fields));
            let want = format!("workload.programs[1].{r}: required for kind \"{kind}\"");
            assert!(e.contains(&want), "want {want}\ngot {e}");
        }
    }
    let e = err(&second("parallel", "work_ms = 1\ncolour = 3\n"));
    assert!(
        e.starts_with("workload.programs[1]: unknown field `colour`, expected one of `affinity`"),
        "{e}"
    );
    assert!(
        e.contains("`iterations`") && e.contains("`kind`") && !e.contains("`chunks`"),
        "{e}"
    );
    let e = err(&second("sequental", "work_ms = 1\n"));
    assert!(
        e.contains(
            "workload.programs[1].kind: unknown variant `sequental`, expected one of `sequential`, \
             `parallel`, `dynamic`, `fork_join`, `pool`, `periodic`, `phases`"
        ),
        "{e}"
    );
    let e = err(&format!("{HEAD}[[workload.programs]]\nwork_ms = 1\n"));
    assert!(
        e.contains("workload.programs[0]: missing field `kind`"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}[[workload.programs]]\nkind = 3\nwork_ms = 1\n"
    ));
    assert!(
        e.contains("workload.programs[0].kind: 3 is not a kind; expected one of"),
        "{e}"
    );
    // Type errors keep their path, inside the shared fields and the kind's.
    let e = err(&second("parallel", "work_ms = 1\naffinity = [0, \"x\"]\n"));
    assert!(
        e.contains("workload.programs[1].affinity[1]: invalid type: string \"x\""),
        "{e}"
    );
    let e = err(&second(
        "phases",
        "phases = [{ compute_ms = 1 }, { sleep_ms = \"x\" }]\n",
    ));
    assert!(
        e.contains("workload.programs[1].phases[1].sleep_ms: invalid type"),
        "{e}"
    );
    let e = err(&second("dynamic", "work_ms = 1\nchunks = -2\n"));
    assert!(
        e.contains("workload.programs[1].chunks: invalid value: integer `-2`"),
        "{e}"
    );
    let e = err(&format!("{HEAD}[[workload.programs]]\nkind = \"pool\"\nwork_ms = 1\nchunks = 2\nphases = [{{ x = 1 }}]\n"));
    assert!(
        e.contains("workload.programs[0].phases: not used by kind \"pool\""),
        "{e}"
    );
}

#[test]
fn null_fields_of_other_kinds_are_absent_as_before() {
    let v: Value = serde_json::json!({
        "duration_s": 1.0,
        "machine": {"preset": "smp-4"},
        "workload": {"programs": [
            {"kind": "parallel", "work_ms": 4, "threads": 2, "chunks": null, "iterations": null}
        ]}
    });
    let s = from_value(v).expect("null fields are absent");
    assert!(matches!(
        s.spec.workload.programs[0].pattern,
        ProgramPattern::Parallel { work_ms, iterations: None } if work_ms == 4.0
    ));
    let v: Value = serde_json::json!({
        "duration_s": 1.0,
        "machine": {"preset": "smp-4"},
        "workload": {"programs": [{"kind": "sequential", "work_ms": null}]}
    });
    let e = from_value(v).unwrap_err().to_string();
    assert!(
        e.contains("workload.programs[0].work_ms: required for kind \"sequential\""),
        "{e}"
    );
}

#[test]
fn written_scenarios_read_back_the_same() {
    let mut text = String::from(HEAD);
    for (kind, _, _) in EXPECTED {
        text.push_str(&format!(
            "[[workload.programs]]\nname = \"{kind}\"\nkind = \"{kind}\"\nnice = 3\n{}",
            minimal(kind)
        ));
    }
    text.push_str(
        "[[workload.programs]]\nkind = \"periodic\"\nperiod_ms = 5\nwcet_ms = 1\n\
         deadline_ms = 4\nrepeat = 3\nnice_schedule = [{ after = 1, nice = 2 }]\n",
    );
    let s = ok(&text);
    let json = s.to_json();
    let back = parse(&json, "j", Format::Json, &[]).expect("JSON reads back");
    assert_eq!(back.to_json(), json);
    let toml_text = s.to_toml().expect("TOML");
    let back = parse(&toml_text, "t", Format::Toml, &[]).expect("TOML reads back");
    assert_eq!(back.to_json(), json);
    // One flat table per program: name, kind, the kind's fields, the rest.
    let v: Value = serde_json::from_str(&json).unwrap();
    let p = &v["workload"]["programs"][5];
    assert_eq!(p["kind"], "periodic");
    assert_eq!(p["period_ms"], 10.0);
    assert_eq!(p["nice"], 3);
    assert!(p.get("periodic").is_none());
}

#[test]
fn overrides_edit_the_flat_table() {
    let text = second("parallel", "threads = 2\nwork_ms = 10\n");
    let s = parse(
        &text,
        "t",
        Format::Toml,
        &[
            ("workload.programs[1].threads".into(), "6".into()),
            ("workload.programs[1].iterations".into(), "3".into()),
        ],
    )
    .unwrap();
    let p = &s.spec.workload.programs[1];
    assert_eq!(p.common.threads, Some(6));
    assert!(matches!(
        p.pattern,
        ProgramPattern::Parallel {
            iterations: Some(3),
            ..
        }
    ));
    // Changing the kind by override re-checks the fields.
    let e = parse(
        &text,
        "t",
        Format::Toml,
        &[("workload.programs[1].kind".into(), "periodic".into())],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("workload.programs[1].work_ms: not used by kind \"periodic\""),
        "{e}"
    );
}

#[test]
fn the_schema_is_one_flat_table_with_every_field() {
    let schema: Value = serde_json::from_str(&json_schema()).unwrap();
    let defs = &schema["definitions"];
    let p = &defs["ProgramSpec"];
    assert_eq!(p["required"], serde_json::json!(["kind"]));
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(
        p["properties"]["kind"]["allOf"][0]["$ref"],
        "#/definitions/ProgramKind"
    );
    for (_, fields, _) in EXPECTED {
        for f in *fields {
            assert!(p["properties"].get(*f).is_some(), "{f}");
        }
    }
    for f in [
        "name",
        "threads",
        "nice",
        "affinity",
        "smt_factor",
        "slice_ms",
    ] {
        assert!(p["properties"].get(f).is_some(), "{f}");
    }
    let names: Vec<&str> = defs["ProgramKind"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["enum"][0].as_str().unwrap())
        .collect();
    let want: Vec<&str> = EXPECTED.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(names, want);
    assert!(defs.get("PhaseSpec").is_some() && defs.get("NiceStep").is_some());
}

//! Checks of the batch outputs (`mcheck audit`, `mcheck test`): SARIF against the official
//! SARIF 2.1.0 schema, JUnit XML against the JUnit XSD of Jenkins' xunit plugin, and the
//! JUnit test cases read back with an XML parser.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

/// Validates a JSON file against a JSON schema with Debian's python3-jsonschema (every
/// error with its place, format checks on); exits 1 when the file does not validate.
const VALIDATE_JSON: &str = r#"
import json, sys
from jsonschema.validators import validator_for
schema = json.load(open(sys.argv[1]))
instance = json.load(open(sys.argv[2]))
cls = validator_for(schema)
cls.check_schema(schema)
validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.path)))
for e in errors:
    print("%s at /%s" % (e.message, "/".join(map(str, e.path))))
sys.exit(1 if errors else 0)
"#;

/// Validates a SARIF file against the vendored official schema (tests/data), with
/// `/usr/bin/python3` and Debian's python3-jsonschema, which `make deps` installs. A missing
/// validator fails the test: nothing is skipped.
pub fn assert_valid_sarif(path: &Path) -> Value {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json");
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(VALIDATE_JSON)
        .arg(&schema)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("/usr/bin/python3 is needed to validate SARIF ({e})"));
    assert!(
        out.status.success(),
        "invalid SARIF in {} (or no python3-jsonschema: run `make deps`):\n{}{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    sarif
}

/// Validates a JUnit file against the vendored JUnit XSD (tests/data/junit-10.xsd, the
/// schema of Jenkins' xunit plugin) with `xmllint --schema` (Debian's libxml2-utils, which
/// `make deps` installs). A missing xmllint fails the test: nothing is skipped.
pub fn assert_valid_junit(path: &Path) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit-10.xsd");
    let out = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(path)
        .output()
        .unwrap_or_else(|e| {
            panic!("xmllint is needed to validate JUnit XML against its XSD ({e}): run `make deps` (Debian package libxml2-utils)")
        });
    assert!(
        out.status.success(),
        "{} does not validate against {}:\n{}",
        path.display(),
        xsd.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `<testcase>` of a JUnit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JunitCase {
    /// Its `classname`.
    pub classname: String,
    /// Its `name`.
    pub name: String,
    /// `success`, `failure`, `error` or `skipped`.
    pub outcome: String,
    /// The `type` of its failure or error (empty otherwise).
    pub kind: String,
    /// The `message` of its failure, error or skip.
    pub message: String,
    /// The text of its failure or error.
    pub text: String,
}

/// JUnit validated against its XSD and read back with an XML parser: every test case in
/// order.
pub fn junit_testcases(path: &Path) -> Vec<JunitCase> {
    use quick_xml::events::Event;
    assert_valid_junit(path);
    let text = fs::read_to_string(path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut cases: Vec<JunitCase> = Vec::new();
    let mut inside = false;
    let mut in_outcome = false;
    let mut depth = 0;
    let attr = |e: &quick_xml::events::BytesStart<'_>, key: &[u8]| {
        e.attributes()
            .flatten()
            .find(|a| a.key.as_ref() == key)
            .map(|a| {
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .unwrap()
                    .into_owned()
            })
            .unwrap_or_default()
    };
    loop {
        let ev = reader.read_event().expect("well-formed JUnit XML");
        let is_empty = matches!(ev, Event::Empty(_));
        match ev {
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                if name == "testcase" {
                    cases.push(JunitCase {
                        classname: attr(&e, b"classname"),
                        name: attr(&e, b"name"),
                        outcome: "success".to_string(),
                        kind: String::new(),
                        message: String::new(),
                        text: String::new(),
                    });
                    inside = !is_empty;
                } else if inside && ["failure", "error", "skipped"].contains(&name.as_str()) {
                    let c = cases.last_mut().unwrap();
                    c.outcome = name;
                    c.kind = attr(&e, b"type");
                    c.message = attr(&e, b"message");
                    in_outcome = !is_empty;
                }
                if !is_empty {
                    depth += 1;
                }
            }
            Event::Text(t) if in_outcome => {
                cases.last_mut().unwrap().text += &t.decode().unwrap();
            }
            Event::GeneralRef(r) if in_outcome => {
                let name = r.decode().unwrap().into_owned();
                let c = match name.as_str() {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "apos" => '\'',
                    "quot" => '"',
                    _ => r.resolve_char_ref().ok().flatten().unwrap_or('?'),
                };
                cases.last_mut().unwrap().text.push(c);
            }
            Event::End(e) => {
                depth -= 1;
                match e.name().as_ref() {
                    b"testcase" => inside = false,
                    b"failure" | b"error" | b"skipped" => in_outcome = false,
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0);
    cases
}

/// JUnit validated against its XSD and read back: test case name →
/// failure/error/skipped/success.
pub fn junit_cases(path: &Path) -> BTreeMap<String, String> {
    junit_testcases(path)
        .into_iter()
        .map(|c| (c.name, c.outcome))
        .collect()
}

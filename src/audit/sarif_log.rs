//! The part of the SARIF 2.1.0 object model that mcheck writes, as plain serde structs.
//!
//! Only what `results.sarif` uses is here, with the schema's property names (camelCase,
//! `$schema`); an absent optional property is left out, as the schema wants, never written
//! as `null`. The audit's tests validate the output against the official schema
//! (tests/data/sarif-schema-2.1.0.json), which is what keeps these names true.
//! (A generated model, the serde-sarif crate, cost a fifth of the dependencies' build time
//! for the dozen objects used here.)

use std::collections::BTreeMap;

use serde::Serialize;

/// The top-level log.
#[derive(Debug, Clone, Serialize)]
pub struct Sarif {
    /// The URI of the schema the log follows.
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Always "2.1.0".
    pub version: String,
    /// One run per tool invocation; an audit writes one.
    pub runs: Vec<Run>,
}

/// One run of the tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The tool and its rules.
    pub tool: Tool,
    /// What happened when the tool ran, when there is something to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invocations: Option<Vec<Invocation>>,
    /// Base URIs that relative artifact locations name by id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_uri_base_ids: Option<BTreeMap<String, ArtifactLocation>>,
    /// One result per finding.
    pub results: Vec<SarifResult>,
}

/// The tool that produced the run.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// mcheck itself.
    pub driver: ToolComponent,
}

/// A tool component: its name, version and rules.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolComponent {
    /// The tool's name.
    pub name: String,
    /// Its version, as it prints it.
    pub version: String,
    /// Its version, as a semantic version.
    pub semantic_version: String,
    /// One rule per kind of finding.
    pub rules: Vec<ReportingDescriptor>,
}

/// A rule: one kind of finding.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportingDescriptor {
    /// The rule's id (the finding kind's name).
    pub id: String,
    /// Its readable name.
    pub name: String,
    /// One sentence about it.
    pub short_description: MultiformatMessageString,
}

/// A message given as plain text.
#[derive(Debug, Clone, Serialize)]
pub struct MultiformatMessageString {
    /// The text.
    pub text: String,
}

/// A message given as plain text.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    /// The text.
    pub text: String,
}

impl Message {
    /// A message with this text.
    pub fn text(text: impl Into<String>) -> Self {
        Message { text: text.into() }
    }
}

/// How a run went: whether it finished, and notes about targets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    /// False when the audit was interrupted.
    pub execution_successful: bool,
    /// Why the run ended early, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code_description: Option<String>,
    /// One note per target that was not run or could not be checked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_execution_notifications: Vec<Notification>,
}

/// A note about the run itself.
#[derive(Debug, Clone, Serialize)]
pub struct Notification {
    /// What happened.
    pub message: Message,
    /// "note", "warning" or "error".
    pub level: String,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SarifResult {
    /// The rule's id.
    pub rule_id: String,
    /// The rule's index in the driver's rules.
    pub rule_index: usize,
    /// Always "error".
    pub level: String,
    /// The finding's message and how to replay it.
    pub message: Message,
    /// Where it happened.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
    /// The other threads' innermost frames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_locations: Vec<Location>,
    /// Fingerprints by key, stable across runs.
    pub partial_fingerprints: BTreeMap<String, String>,
    /// "new" or "unchanged" against a baseline, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_state: Option<String>,
    /// Why the finding is suppressed, when it is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suppressions: Vec<Suppression>,
    /// mcheck's own properties (target, preemptions, schedule).
    pub properties: BTreeMap<String, serde_json::Value>,
}

/// A location: a source position, a function, or both.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// Its id among a result's related locations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<usize>,
    /// The file and line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_location: Option<PhysicalLocation>,
    /// The function.
    pub logical_locations: Vec<LogicalLocation>,
    /// What is at this location.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

/// A file and a region of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalLocation {
    /// The file.
    pub artifact_location: ArtifactLocation,
    /// The line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<Region>,
}

/// A file, by URI (relative to a base id when it has one).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactLocation {
    /// The URI or URI reference.
    pub uri: String,
    /// The base the URI is relative to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri_base_id: Option<String>,
}

/// A region of a file: its first line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Region {
    /// The line, from 1.
    pub start_line: u32,
}

/// A function, by name.
#[derive(Debug, Clone, Serialize)]
pub struct LogicalLocation {
    /// The function's name (or module+offset).
    pub name: String,
    /// Always "function".
    pub kind: String,
}

/// A suppression of a result.
#[derive(Debug, Clone, Serialize)]
pub struct Suppression {
    /// "external": the audit's manifest suppresses it.
    pub kind: String,
    /// Why.
    pub justification: String,
}

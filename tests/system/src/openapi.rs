//! OpenAPI documents as the tests read them: YAML to JSON, local `$ref`s
//! resolved, schemas checked with JSON Schema 2020-12, and a reply's
//! status, headers, content type and body checked against the operation's
//! response (docs/openapi.yaml for the worker, docs/scheduler-openapi.yaml
//! for the scheduler's admin API).

use std::collections::BTreeSet;

use queuegate_testkit::{repo_root, set_cookie_pair};
use serde_json::{json, Value};

/// The OpenAPI document as JSON.
#[derive(Debug)]
pub struct Spec {
    /// The document.
    pub doc: Value,
}

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => json!(r.parse::<f64>().expect("YAML real")),
        Yaml::Integer(i) => json!(i),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match yaml_to_json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Null => Value::Null,
        other => panic!("unsupported YAML node in docs/openapi.yaml: {other:?}"),
    }
}

impl Spec {
    /// The document at `relative` (to the repository).
    pub fn load(relative: &str) -> Spec {
        let path = repo_root().join(relative);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {relative}: {e}"));
        let docs = yaml_rust2::YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{relative} does not parse: {e}"));
        let doc = yaml_to_json(&docs[0]);
        assert_eq!(
            doc["openapi"].as_str().map(|v| v.starts_with("3.1")),
            Some(true)
        );
        Spec { doc }
    }

    /// Follows a local `$ref` (`#/components/...`) until a non-reference.
    pub fn resolve<'a>(&'a self, mut v: &'a Value) -> &'a Value {
        while let Some(r) = v.get("$ref").and_then(Value::as_str) {
            let pointer = r.strip_prefix('#').expect("only local $refs");
            v = self
                .doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {r}"));
        }
        v
    }

    /// Why `instance` does not match `schema` (empty: it does). The
    /// schema's `$ref`s point into the document's `components`.
    pub fn errors(&self, schema: &Value, instance: &Value) -> Vec<String> {
        let mut root = schema.clone();
        if let Value::Object(map) = &mut root {
            map.insert("components".into(), self.doc["components"].clone());
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"));
        validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    pub fn validate(&self, schema: &Value, instance: &Value, what: &str) {
        let errors = self.errors(schema, instance);
        assert!(
            errors.is_empty(),
            "{what}: {instance} violates the schema:\n  {}",
            errors.join("\n  ")
        );
    }

    pub fn component(&self, name: &str) -> Value {
        json!({ "$ref": format!("#/components/schemas/{name}") })
    }

    /// The response object for `status` of an operation, and its key.
    pub fn response(&self, path: &str, method: &str, status: u16) -> (&Value, String) {
        let op = &self.doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is not in the document");
        let responses = &op["responses"];
        let key = status.to_string();
        if responses.get(&key).is_some() {
            return (self.resolve(&responses[&key]), key);
        }
        match responses.get("default") {
            Some(d) => (self.resolve(d), "default".into()),
            None => panic!("status {status} is not documented for {method} {path}"),
        }
    }

    /// Checks headers and body of `reply` against a response object.
    pub fn check_response(&self, response: &Value, reply: &Reply, what: &str) {
        if let Some(headers) = response.get("headers").and_then(Value::as_object) {
            for (name, header) in headers {
                let header = self.resolve(header);
                let values = reply.header_values(name);
                if header["required"] == json!(true) {
                    assert!(!values.is_empty(), "{what}: required header {name} missing");
                }
                for v in values {
                    let instance = match header["schema"]["type"].as_str() {
                        Some("integer") => v
                            .parse::<i64>()
                            .map(Value::from)
                            .unwrap_or(Value::String(v.clone())),
                        _ => Value::String(v.clone()),
                    };
                    self.validate(
                        &header["schema"],
                        &instance,
                        &format!("{what} header {name}"),
                    );
                }
            }
        }
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return;
        };
        if reply.method == "HEAD" {
            return;
        }
        let media = reply.media_type();
        let (_, entry) = content
            .iter()
            .find(|(m, _)| m.as_str() == media || m.as_str() == "*/*")
            .unwrap_or_else(|| panic!("{what}: content type {media:?} is not documented"));
        if media == "application/json" {
            let body: Value = serde_json::from_str(&reply.body)
                .unwrap_or_else(|e| panic!("{what}: body is not JSON ({e}): {}", reply.body));
            self.validate(&entry["schema"], &body, what);
        } else if entry["schema"]["type"] == json!("string") {
            assert!(!reply.body.is_empty(), "{what}: empty body");
        }
    }

    /// Every (path, method, response key) the document lists.
    pub fn documented(&self) -> BTreeSet<(String, String, String)> {
        let mut out = BTreeSet::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                if let Some(responses) = op.get("responses").and_then(Value::as_object) {
                    for key in responses.keys() {
                        out.insert((path.clone(), method.to_ascii_uppercase(), key.clone()));
                    }
                }
            }
        }
        out
    }
}

/// A reply as the document describes it.
#[derive(Debug)]
pub struct Reply {
    /// The request's method.
    pub method: String,
    /// The status.
    pub status: u16,
    /// Every header (names as sent).
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl Reply {
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn media_type(&self) -> String {
        let ct = self.header_values("content-type").pop().unwrap_or_default();
        ct.split(';').next().unwrap_or_default().trim().to_string()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.header_values("set-cookie").into_iter().find_map(|c| {
            let (k, v) = set_cookie_pair(&c)?;
            (k == name).then(|| v.to_string())
        })
    }
}

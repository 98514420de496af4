//! JSON read and written without `serde_json::Value`: in the edge's wasm
//! a `Value` brings its own reader, writer and `BTreeMap`, about 4 KB of
//! the gzipped wasm (BENCHMARKS.md, "Worker wasm size"), where the few
//! values the edge reads whole (the page's and the notice's texts, a
//! JWT's header and claims, a key set) need one small visitor. An object
//! keeps its members in order, a key given twice twice; [`Json::get`]
//! takes the last, as `JSON.parse` and `serde_json::Value` do.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as an `f64` (what these readers need: times, not ids).
    Number(f64),
    /// A string.
    Text(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, its members in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// `json` read; None when it is not JSON.
    pub fn parse(json: &str) -> Option<Json> {
        serde_json::from_str(json).ok()
    }

    /// The member `name` of an object (its last, when given twice); None
    /// for another value.
    pub fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The items, if it is an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Whether it is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Json, E> {
        Ok(Json::Text(s.to_string()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Json, E> {
        Ok(Json::Text(s))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, Json>()? {
            members.push(member);
        }
        Ok(Json::Object(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Json>()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n as f64))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n as f64))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        Ok(Json::Number(n))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
}

/// Gives `key` the text `text` in `texts`, over any it had (in its
/// place), else at the end: a key given twice keeps its last text, as
/// `JSON.parse` reads it.
pub fn set_text(texts: &mut Vec<(String, String)>, key: String, text: String) {
    match texts.iter_mut().find(|(k, _)| *k == key) {
        Some((_, old)) => *old = text,
        None => texts.push((key, text)),
    }
}

/// Texts by key, written as one JSON object in their order.
#[derive(Debug, Clone, Copy)]
pub struct TextObject<'a>(pub &'a [(String, String)]);

impl Serialize for TextObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, t)| (k, t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_order_and_shape() {
        let v = Json::parse(
            r#"{"a":"x","b":{"c":"y"},"n":-1.5,"l":[1,{"z":null}],"t":true,"u":null,"a":"w"}"#,
        );
        let text = |t: &str| Json::Text(t.to_string());
        assert_eq!(
            v,
            Some(Json::Object(vec![
                ("a".into(), text("x")),
                ("b".into(), Json::Object(vec![("c".into(), text("y"))])),
                ("n".into(), Json::Number(-1.5)),
                (
                    "l".into(),
                    Json::Array(vec![
                        Json::Number(1.0),
                        Json::Object(vec![("z".into(), Json::Null)])
                    ])
                ),
                ("t".into(), Json::Bool(true)),
                ("u".into(), Json::Null),
                ("a".into(), text("w")),
            ]))
        );
        let v = v.unwrap();
        assert_eq!(
            v.get("a").and_then(Json::as_str),
            Some("w"),
            "the last of a key given twice"
        );
        assert_eq!(v.get("n").and_then(Json::as_f64), Some(-1.5));
        assert_eq!(
            v.get("l").and_then(Json::as_array).map(<[Json]>::len),
            Some(2)
        );
        assert_eq!(v.get("missing"), None);
        assert!(v.is_object() && !text("s").is_object());
        assert_eq!(text("s").get("a"), None);
        assert_eq!(Json::parse("\"s\""), Some(text("s")));
        assert_eq!(Json::parse("{"), None);
        assert_eq!(Json::parse("1 2"), None);
        assert_eq!(
            Json::parse("18446744073709551615"),
            Some(Json::Number(u64::MAX as f64))
        );
    }

    #[test]
    fn it_reads_what_serde_json_reads_and_refuses_what_it_refuses() {
        for text in [
            r#"{"k":[1,2,{"x":"\u00e9\n"}],"e":1e300,"m":-0}"#,
            "[]",
            "{}",
            " [ true , false , null ] ",
        ] {
            let ours = Json::parse(text).is_some();
            let theirs = serde_json::from_str::<serde_json::Value>(text).is_ok();
            assert_eq!((ours, theirs), (true, true), "{text}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            Json::parse(&deep),
            None,
            "nesting is bounded as serde_json bounds it"
        );
        assert_eq!(Json::parse("[1,]"), None);
        assert_eq!(Json::parse("{\"a\":1,}"), None);
    }

    #[test]
    fn a_text_set_twice_keeps_its_place_and_its_last_text() {
        let mut texts = Vec::new();
        for (k, t) in [("a", "1"), ("b", "2"), ("a", "3")] {
            set_text(&mut texts, k.into(), t.into());
        }
        assert_eq!(
            texts,
            [("a".to_string(), "3".to_string()), ("b".into(), "2".into())]
        );
    }

    #[test]
    fn a_text_object_is_written_in_order_and_escaped() {
        let texts = [
            ("waiting".to_string(), "Bitte \"warten\"".to_string()),
            ("continue".to_string(), "</script>".to_string()),
        ];
        assert_eq!(
            serde_json::to_string(&TextObject(&texts)).unwrap(),
            r#"{"waiting":"Bitte \"warten\"","continue":"</script>"}"#
        );
        assert_eq!(serde_json::to_string(&TextObject(&[])).unwrap(), "{}");
    }
}

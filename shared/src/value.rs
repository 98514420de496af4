//! A client-neutral Redis reply, so one set of decoders serves the worker
//! (Upstash REST JSON) and the scheduler (redis-rs values).

/// A Redis reply as the scripts produce it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Nil / false from Lua.
    Nil,
    /// A Lua number (truncated to an integer by Redis).
    Int(i64),
    /// A bulk or simple string.
    Data(Vec<u8>),
    /// A Lua table.
    Array(Vec<Value>),
}

/// A reply that does not have the shape its script promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected reply from the {script} script: {what}")]
pub struct DecodeError {
    /// Which script answered.
    pub script: &'static str,
    /// What was wrong.
    pub what: String,
}

impl DecodeError {
    pub(crate) fn new(script: &'static str, what: impl Into<String>) -> Self {
        DecodeError {
            script,
            what: what.into(),
        }
    }
}

use std::collections::BTreeMap;

use crate::reply::ReplyKind;

impl Value {
    /// The elements of an array reply.
    pub fn into_array(self, script: &'static str) -> Result<Vec<Value>, DecodeError> {
        match self {
            Value::Array(items) => Ok(items),
            other => Err(DecodeError::new(
                script,
                format!("expected an array, got {other:?}"),
            )),
        }
    }

    /// Text of a string reply.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Data(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// An integer, from an integer reply or a decimal string.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Data(_) => self.as_text()?.parse().ok(),
            _ => None,
        }
    }

    /// A float, from an integer or a decimal string (Lua numbers that Redis
    /// would otherwise truncate are returned as strings).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(n) => Some(*n as f64),
            Value::Data(_) => self.as_text()?.parse().ok().filter(|f: &f64| f.is_finite()),
            _ => None,
        }
    }
}

/// Positional access to an array reply with errors that name the script.
#[derive(Debug)]
pub(crate) struct Fields {
    script: &'static str,
    items: Vec<Value>,
}

impl Fields {
    pub(crate) fn new(script: &'static str, value: Value) -> Result<Self, DecodeError> {
        Ok(Fields {
            script,
            items: value.into_array(script)?,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, i: usize) -> Result<&Value, DecodeError> {
        self.items
            .get(i)
            .ok_or_else(|| DecodeError::new(self.script, format!("missing field {i}")))
    }

    pub(crate) fn text(&self, i: usize) -> Result<&str, DecodeError> {
        self.get(i)?
            .as_text()
            .ok_or_else(|| DecodeError::new(self.script, format!("field {i} is not text")))
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64, DecodeError> {
        self.get(i)?
            .as_i64()
            .ok_or_else(|| DecodeError::new(self.script, format!("field {i} is not an integer")))
    }

    pub(crate) fn uint(&self, i: usize) -> Result<u64, DecodeError> {
        let n = self.int(i)?;
        u64::try_from(n)
            .map_err(|_| DecodeError::new(self.script, format!("field {i} is negative: {n}")))
    }

    /// A reply tag ([`ReplyKind`]); an error for a tag no script sends.
    pub(crate) fn kind(&self, i: usize) -> Result<ReplyKind, DecodeError> {
        let tag = self.text(i)?;
        ReplyKind::parse(tag).ok_or_else(|| self.error(format!("unknown reply kind {tag:?}")))
    }

    /// An error for a tag this script does not send.
    pub(crate) fn unexpected(&self, kind: ReplyKind) -> DecodeError {
        self.error(format!("unexpected reply kind {kind}"))
    }

    /// A field holding a flat field/value array (an HGETALL reply).
    pub(crate) fn pairs(&self, i: usize) -> Result<BTreeMap<String, String>, DecodeError> {
        let Value::Array(items) = self.get(i)? else {
            return Err(self.error(format!("field {i} is not an array")));
        };
        let text = |v: &Value| {
            v.as_text()
                .map(str::to_string)
                .ok_or_else(|| self.error(format!("field {i} holds a non-text value")))
        };
        items
            .chunks(2)
            .map(|pair| match pair {
                [k, v] => Ok((text(k)?, text(v)?)),
                _ => Err(self.error(format!("field {i} has an odd length"))),
            })
            .collect()
    }

    /// A float field, `None` when nil or empty.
    pub(crate) fn opt_f64(&self, i: usize) -> Option<f64> {
        self.items.get(i).and_then(Value::as_f64)
    }

    pub(crate) fn error(&self, what: impl Into<String>) -> DecodeError {
        DecodeError::new(self.script, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_as_integers_or_strings() {
        assert_eq!(Value::Int(7).as_i64(), Some(7));
        assert_eq!(Value::Data(b"42".to_vec()).as_i64(), Some(42));
        assert_eq!(Value::Data(b"17.5".to_vec()).as_f64(), Some(17.5));
        assert_eq!(Value::Data(b"inf".to_vec()).as_f64(), None);
        assert_eq!(Value::Nil.as_i64(), None);
    }

    #[test]
    fn errors_name_the_script() {
        let f = Fields::new("position", Value::Array(vec![Value::Nil])).unwrap();
        let err = f.text(0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unexpected reply from the position script: field 0 is not text"
        );
        assert!(Fields::new("admit", Value::Int(1)).is_err());
    }
}

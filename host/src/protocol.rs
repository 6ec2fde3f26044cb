//! The NDJSON stream of `rendergate serve` (docs/protocol.md §2): one input line
//! into one [`Event`], one [`Output`] into one output line. A bad line is a
//! [`LineError`] naming its line number; it never reaches the gate.

use crate::core::{CheckOutcome, Event, LatchState, PodList, PodReport};
use crate::policy::RevertTarget;
use crate::policy::shadow::{Actions, ShadowTrigger};
use crate::render::{FileKind, Render, RenderFile};
use crate::runtime::Output;
use policy_core::Name;
use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// Every field any input type has, in one flat struct: parsed in one pass
/// with no intermediate tree, names borrowed from the line where JSON allows
/// (no escapes). A line this cannot take as a complete event goes the slow
/// way, [`parse_input`], which says precisely what is wrong.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    pod: Option<Text<'a>>,
    #[serde(default, borrow)]
    plan: Option<Text<'a>>,
    #[serde(default, borrow)]
    render: Option<Text<'a>>,
    #[serde(default, borrow)]
    running_plan: Option<Text<'a>>,
    #[serde(default, borrow)]
    baseline_plan: Option<Text<'a>>,
    #[serde(default)]
    correlation: Option<String>,
    #[serde(default, borrow)]
    config: Option<OneCopy<'a>>,
    // Not `Option`: `"files": null` must fail here as it does the slow way.
    #[serde(default)]
    files: Vec<WireFile>,
    #[serde(default)]
    pods: Option<Pods>,
}

/// A string borrowed from the line when it has no escapes. (serde borrows
/// a `Cow` only when it is a field of its own, not inside an `Option`.)
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// The fast way: a well-formed line of a known type, or `None`.
fn parse_fields(text: &str) -> Option<Event> {
    // serde reads a struct from a JSON array too; the protocol wants objects.
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let f: Fields<'_> = serde_json::from_str(text).ok()?;
    let name = |t: Text<'_>| Name::from(&*t.0);
    Some(match &*f.kind.0 {
        "applied" => Event::Applied(PodReport {
            pod: name(f.pod?),
            render: f.render.map(name),
            plan: name(f.plan?),
            running_plan: f.running_plan.map(name),
            baseline_plan: f.baseline_plan.map(name),
        }),
        "rendered" => Event::Rendered(
            Render::new(
                f.plan?.0.into_owned(),
                f.render?.0.into_owned(),
                f.config?.0,
                files(f.files),
            )
            .with_correlation(f.correlation),
        ),
        "pod_terminated" => Event::PodTerminated { pod: f.pod?.0.into_owned() },
        "pods_discovered" => Event::PodsDiscovered { pods: f.pods?.0 },
        "lost_leadership" => Event::LostLeadership,
        _ => return None,
    })
}

/// A line that could not become an event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// Counted from 1 over all input lines, blank ones included.
    pub line: u64,
    pub message: String,
}

/// The input types docs/protocol.md knows.
const INPUT_TYPES: [&str; 5] =
    ["rendered", "applied", "pod_terminated", "pods_discovered", "lost_leadership"];

/// Longest error message: serde's messages quote the bad value, which may be
/// huge; the middle of a longer message is cut (its head says what is wrong,
/// its tail where), so a huge bad field costs no huge `error` or log line.
const MESSAGE_HEAD: usize = 400;
const MESSAGE_TAIL: usize = 100;

/// JSON's own whitespace: a line of only these is blank; any other
/// (a vertical tab, a no-break space) is a line that is not JSON.
const JSON_SPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// Parses one input line. Blank lines are `Ok(None)`.
pub fn parse_line(line: u64, text: &str) -> Result<Option<Event>, LineError> {
    if text.trim_matches(JSON_SPACE).is_empty() {
        return Ok(None);
    }
    if let Some(event) = parse_fields(text) {
        return Ok(Some(event));
    }
    parse_input(line, text).map(Some)
}

/// The slow way, for a line the fast way declined, so that it gets a
/// precise error. No JSON tree (a tree of small values costs many times the
/// line): a first pass reads only `type` and skips everything else, then the
/// type's own struct reads the line, skipping what it does not keep; each
/// pass holds at most the fields it keeps.
fn parse_input(line: u64, text: &str) -> Result<Event, LineError> {
    let fail = |message: String| LineError { line, message: clip(message) };
    // serde reads a struct from a JSON array too; the protocol wants objects.
    if !text.trim_start_matches(JSON_SPACE).starts_with('{') {
        return Err(fail(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => "expected a JSON object".into(),
            Err(e) => format!("not valid JSON: {e}"),
        }));
    }
    let kind = match serde_json::from_str::<TypeOnly>(text) {
        Ok(TypeOnly(kind)) => kind,
        Err(e) if e.is_data() => return Err(fail(e.to_string())),
        Err(e) => return Err(fail(format!("not valid JSON: {e}"))),
    };
    let typed = |e: serde_json::Error| fail(e.to_string());
    Ok(match kind {
        TypeValue::Missing => return Err(fail("missing field `type`".into())),
        TypeValue::Other(what) => {
            return Err(fail(format!("field `type` must be a string, not {what}")));
        }
        TypeValue::Name(name) => match name.as_str() {
            "rendered" => {
                let r: Rendered = serde_json::from_str(text).map_err(typed)?;
                Event::Rendered(
                    Render::new(r.plan, r.render, r.config.0, files(r.files))
                        .with_correlation(r.correlation),
                )
            }
            "applied" => {
                let a: Applied = serde_json::from_str(text).map_err(typed)?;
                Event::Applied(PodReport {
                    pod: a.pod.into(),
                    render: a.render.map(Into::into),
                    plan: a.plan.into(),
                    running_plan: a.running_plan.map(Into::into),
                    baseline_plan: a.baseline_plan.map(Into::into),
                })
            }
            "pod_terminated" => {
                let p: PodTerminated = serde_json::from_str(text).map_err(typed)?;
                Event::PodTerminated { pod: p.pod }
            }
            "pods_discovered" => {
                let p: PodsDiscovered = serde_json::from_str(text).map_err(typed)?;
                Event::PodsDiscovered { pods: p.pods.0 }
            }
            "lost_leadership" => Event::LostLeadership,
            _ => {
                let (name, expected) = (clip(name), INPUT_TYPES.join(", "));
                return Err(fail(format!("unknown type `{name}`, expected one of {expected}")));
            }
        },
    })
}

/// `message` with its middle cut when it is longer than
/// [`MESSAGE_HEAD`] + [`MESSAGE_TAIL`] bytes (cut on character boundaries).
fn clip(message: String) -> String {
    if message.len() <= MESSAGE_HEAD + MESSAGE_TAIL {
        return message;
    }
    let head = floor_char_boundary(&message, MESSAGE_HEAD);
    let tail = floor_char_boundary(&message, message.len() - MESSAGE_TAIL);
    format!("{}… ({} bytes cut) …{}", &message[..head], tail - head, &message[tail..])
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Each input type's fields, as docs/protocol.md spells them; unknown fields
/// (`type` among them) are skipped.
#[derive(Deserialize)]
struct Rendered<'a> {
    plan: String,
    render: String,
    #[serde(default)]
    correlation: Option<String>,
    #[serde(borrow)]
    config: OneCopy<'a>,
    #[serde(default)]
    files: Vec<WireFile>,
}

#[derive(Deserialize)]
struct Applied {
    pod: String,
    plan: String,
    #[serde(default)]
    render: Option<String>,
    #[serde(default)]
    running_plan: Option<String>,
    #[serde(default)]
    baseline_plan: Option<String>,
}

#[derive(Deserialize)]
struct PodTerminated {
    pod: String,
}

#[derive(Deserialize)]
struct PodsDiscovered {
    pods: Pods,
}

/// A `pods` array read straight into a [`PodList`]: no string per name.
struct Pods(PodList);

impl<'de> Deserialize<'de> for Pods {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> Visitor<'de> for Names {
            type Value = Pods;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Pods, A::Error> {
                let mut list = PodList::default();
                while seq.next_element_seed(Push(&mut list))?.is_some() {}
                Ok(Pods(list))
            }
        }
        deserializer.deserialize_seq(Names)
    }
}

/// Reads one name onto the end of a [`PodList`].
struct Push<'l>(&'l mut PodList);

impl<'de> DeserializeSeed<'de> for Push<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Push<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, name: &str) -> Result<(), E> {
        self.0.push(name);
        Ok(())
    }
}

/// A render file read from the line: its content as bytes, decoded as its
/// `encoding` says, in one copy. A bad `encoding` or bad base64 fails the
/// line, as any field of the wrong type does.
struct WireFile(RenderFile);

/// A render file's fields as the line spells them. `content` stays raw
/// (borrowed from the line) until every field is read: `encoding`, which
/// says how to read it, may come after it.
#[derive(Deserialize)]
struct WireFields<'a> {
    #[serde(deserialize_with = "kind_name")]
    kind: FileKind,
    path: String,
    #[serde(default)]
    encoding: Encoding,
    #[serde(borrow)]
    content: &'a RawValue,
}

/// How a file's `content` spells its bytes (docs/protocol.md §2).
#[derive(Default)]
enum Encoding {
    /// The file's UTF-8 text, as a JSON string.
    #[default]
    Text,
    /// The file's bytes in standard base64 (RFC 4648 §4, padded), for
    /// what is not UTF-8: a DER OCSP response, a map with a Latin-1 byte.
    Base64,
}

/// Read by hand: serde's derived enum says only "expected value" of a
/// number or `null`; this names what the field was.
impl<'de> Deserialize<'de> for Encoding {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const NAMES: &[&str] = &["text", "base64"];
        match &*Text::deserialize(deserializer)?.0 {
            "text" => Ok(Encoding::Text),
            "base64" => Ok(Encoding::Base64),
            other => Err(de::Error::unknown_variant(other, NAMES)),
        }
    }
}

/// A file's `kind`: one of its names, as a string (serde's derived enum
/// would also take `{"map": null}`).
fn kind_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<FileKind, D::Error> {
    let name = Text::deserialize(deserializer)?.0;
    FileKind::named(&name).ok_or_else(|| {
        let names: Vec<String> =
            FileKind::ALL.iter().map(|k| format!("`{}`", k.as_str())).collect();
        de::Error::custom(format!("unknown variant `{name}`, expected one of {}", names.join(", ")))
    })
}

/// A file is an object (serde's derived struct would also take an array of
/// its fields in order).
struct FileObject;

impl<'de> Visitor<'de> for FileObject {
    type Value = WireFields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a file object (`kind`, `path`, `content`)")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        WireFields::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

impl<'de> Deserialize<'de> for WireFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let f = deserializer.deserialize_map(FileObject)?;
        let body = string_body(f.content.get())?;
        let content = match f.encoding {
            Encoding::Text => unescape(body)?.into_bytes(),
            Encoding::Base64 => from_base64(body)?.map_err(|problem| {
                de::Error::custom(format!(
                    "file {:?}: `content` is not standard base64: {problem}",
                    f.path
                ))
            })?,
        };
        Ok(WireFile(RenderFile { kind: f.kind, path: f.path, content }))
    }
}

fn files(wire: Vec<WireFile>) -> Vec<RenderFile> {
    wire.into_iter().map(|f| f.0).collect()
}

/// The bytes of a base64 string's body (between its quotes), or what is
/// wrong with them. Decoded where it lies when it has no escapes (base64
/// needs none, though an encoder may write `/` as `\/`), so a large file
/// costs its decoded size only. Strict: padding as RFC 4648 has it, no line
/// breaks or spaces, no bits past the end; one content has one spelling.
fn from_base64<E: de::Error>(body: &str) -> Result<Result<Vec<u8>, String>, E> {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    let text = match memchr::memchr(b'\\', body.as_bytes()) {
        None => Cow::Borrowed(body),
        Some(_) => Cow::Owned(unescape(body)?),
    };
    let symbol = |byte: u8| match byte {
        b' '..=b'~' => format!("{:?}", byte as char),
        _ => format!("byte 0x{byte:02x}"),
    };
    Ok(STANDARD.decode(text.as_bytes()).map_err(|e| match e {
        base64::DecodeError::InvalidByte(at, byte) => {
            format!("{} at offset {at} is not in its alphabet", symbol(byte))
        }
        base64::DecodeError::InvalidLength(symbols) => {
            format!("{symbols} symbols do not make whole bytes")
        }
        base64::DecodeError::InvalidLastSymbol(at, byte) => {
            format!("the last symbol, {} at offset {at}, has bits past the end", symbol(byte))
        }
        base64::DecodeError::InvalidPadding => "the `=` padding is missing or wrong".into(),
    }))
}

/// A JSON string read in one copy: borrowed from the line as raw JSON, then
/// unescaped once into a string of its size. (serde_json unescapes into a
/// scratch buffer, then copies that: a config or map of tens of MB would
/// cost twice its size on top of the line.) Only for lines parsed from a
/// `&str`, which is how every line is parsed here.
struct OneCopy<'a>(String, std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Deserialize<'de> for OneCopy<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?.get();
        unescape(string_body(raw)?).map(|text| OneCopy(text, std::marker::PhantomData))
    }
}

/// The body of a raw JSON string, between its quotes; anything else is
/// the wrong type, in serde's words.
fn string_body<E: de::Error>(raw: &str) -> Result<&str, E> {
    raw.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| E::invalid_type(unexpected(raw), &"a string"))
}

/// What a raw JSON value that is not a string is, for serde's message.
fn unexpected(raw: &str) -> Unexpected<'_> {
    match raw.as_bytes().first() {
        Some(b'{') => Unexpected::Map,
        Some(b'[') => Unexpected::Seq,
        Some(b't') => Unexpected::Bool(true),
        Some(b'f') => Unexpected::Bool(false),
        Some(b'n') => Unexpected::Unit,
        _ => match (raw.parse::<u64>(), raw.parse::<i64>(), raw.parse::<f64>()) {
            (Ok(u), _, _) => Unexpected::Unsigned(u),
            (_, Ok(i), _) => Unexpected::Signed(i),
            (_, _, Ok(f)) => Unexpected::Float(f),
            _ => Unexpected::Other("a JSON value"),
        },
    }
}

/// The text of a JSON string's body (between its quotes), which serde_json
/// has already checked (escapes well formed, no raw control characters);
/// surrogate pairs are checked here, with serde_json's messages.
fn unescape<E: de::Error>(body: &str) -> Result<String, E> {
    let mut text = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = memchr::memchr(b'\\', rest.as_bytes()) {
        text.push_str(&rest[..at]);
        let escape = rest.as_bytes().get(at + 1).copied();
        rest = rest.get(at + 2..).unwrap_or("");
        let c = match escape {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let (c, after) = unicode_escape(rest)?;
                rest = after;
                c
            }
            _ => return Err(E::custom("invalid escape")),
        };
        text.push(c);
    }
    text.push_str(rest);
    Ok(text)
}

/// The character of a `\u` escape (`rest` starts after the `u`), a UTF-16
/// surrogate pair taking two, and what follows it.
fn unicode_escape<E: de::Error>(rest: &str) -> Result<(char, &str), E> {
    let hex = |text: &str| -> Result<u32, E> {
        match text.get(..4) {
            Some(digits) if digits.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Ok(u32::from_str_radix(digits, 16).expect("four hex digits"))
            }
            _ => Err(E::custom("invalid escape")),
        }
    };
    let first = hex(rest)?;
    let rest = &rest[4..];
    if (0xDC00..=0xDFFF).contains(&first) {
        return Err(E::custom("lone leading surrogate in hex escape"));
    }
    if !(0xD800..=0xDBFF).contains(&first) {
        return Ok((char::from_u32(first).expect("not a surrogate"), rest));
    }
    let Some(rest) = rest.strip_prefix("\\u") else {
        return Err(E::custom("unexpected end of hex escape"));
    };
    let second = hex(rest)?;
    if !(0xDC00..=0xDFFF).contains(&second) {
        return Err(E::custom("lone leading surrogate in hex escape"));
    }
    let c = char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        .expect("a surrogate pair");
    Ok((c, &rest[4..]))
}

/// The first pass of the slow way: an object's `type`, every other value
/// skipped unread ([`IgnoredAny`] keeps nothing).
struct TypeOnly(TypeValue);

/// What an object's `type` is.
enum TypeValue {
    Missing,
    Name(String),
    /// Not a string: what it is instead, for the message.
    Other(String),
}

impl<'de> Deserialize<'de> for TypeOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = TypeOnly;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypeOnly, A::Error> {
                let mut kind = TypeValue::Missing;
                while let Some(IsType(is_type)) = map.next_key()? {
                    if !is_type {
                        map.next_value::<IgnoredAny>()?;
                    } else if matches!(kind, TypeValue::Missing) {
                        kind = map.next_value::<TypeField>()?.0;
                    } else {
                        return Err(de::Error::duplicate_field("type"));
                    }
                }
                Ok(TypeOnly(kind))
            }
        }
        deserializer.deserialize_map(Object)
    }
}

/// Whether a key is `type` (compared where it lies; no copy).
struct IsType(bool);

impl<'de> Deserialize<'de> for IsType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = IsType;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<IsType, E> {
                Ok(IsType(key == "type"))
            }
        }
        deserializer.deserialize_identifier(Key)
    }
}

/// The value of `type`: a name, or a note of what else it is.
struct TypeField(TypeValue);

impl<'de> Deserialize<'de> for TypeField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Field;
        impl<'de> Visitor<'de> for Field {
            type Value = TypeField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<TypeField, E> {
                Ok(TypeField(TypeValue::Name(name.to_owned())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<TypeField, E> {
                Ok(other(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TypeField, E> {
                Ok(other(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TypeField, E> {
                Ok(other(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TypeField, E> {
                Ok(other(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<TypeField, E> {
                Ok(other("null"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TypeField, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypeField, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(other("an object"))
            }
        }
        fn other(what: impl fmt::Display) -> TypeField {
            TypeField(TypeValue::Other(what.to_string()))
        }
        deserializer.deserialize_any(Field)
    }
}

/// One output line, field order as docs/protocol.md shows it (`type` first).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Verdict {
        plan: &'a str,
        render: &'a str,
        checksum: &'a str,
        ok: bool,
        refused: bool,
        newest: bool,
        pinned: bool,
        remembered: bool,
        message: &'a str,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        correlation: Option<&'a str>,
    },
    Latch {
        state: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
    },
    Release {
        plan: &'a str,
        render: &'a str,
    },
    Promote {
        pod: &'a str,
        plan: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        render: Option<&'a str>,
    },
    Revert {
        pod: &'a str,
        plan: &'a str,
        to: &'a str,
    },
    Error {
        line: u64,
        message: &'a str,
    },
    Hello {
        protocol: u32,
        version: &'a str,
        policy: &'a str,
        haproxy: &'a str,
        sandbox: &'a str,
        world: &'a str,
    },
    Shadow {
        trigger: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        plan: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pod: Option<&'a str>,
        live: ActionsLine<'a>,
        shadow: ActionsLine<'a>,
    },
}

/// A decision inside a `shadow` line: its items with the fields of the
/// `promote` and `revert` lines.
#[derive(Debug, Serialize)]
struct ActionsLine<'a> {
    promote: Vec<PromoteItem<'a>>,
    revert: Vec<RevertItem<'a>>,
}

#[derive(Debug, Serialize)]
struct PromoteItem<'a> {
    pod: &'a str,
    plan: &'a str,
}

#[derive(Debug, Serialize)]
struct RevertItem<'a> {
    pod: &'a str,
    plan: &'a str,
    to: &'a str,
}

impl<'a> ActionsLine<'a> {
    fn of(actions: &'a Actions) -> Self {
        ActionsLine {
            promote: actions
                .promote
                .iter()
                .map(|p| PromoteItem { pod: &p.pod, plan: &p.plan })
                .collect(),
            revert: actions
                .revert
                .iter()
                .map(|r| RevertItem { pod: &r.pod, plan: &r.plan, to: revert_to(&r.target) })
                .collect(),
        }
    }
}

/// `revert.to`: `baseline` or the plan's id.
fn revert_to(target: &RevertTarget) -> &str {
    match target {
        RevertTarget::Baseline => "baseline",
        RevertTarget::Plan(plan) => plan,
    }
}

/// The protocol's major version, `hello.protocol`: a breaking change to the
/// NDJSON lines raises it (docs/protocol.md).
pub const PROTOCOL_MAJOR: u32 = 1;

/// What `serve` says before it reads a line: who is answering, so a client
/// can refuse a protocol it does not know and log what judges its renders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The live policy's name (`default` for the built-in).
    pub policy: String,
    /// The version from `haproxy -v`'s first line, `unknown` if it gave none.
    pub haproxy: String,
    /// `strict`, `best-effort` or `off`.
    pub sandbox: &'static str,
    /// Which world checks see: `root`, `config-dir`, `fresh` (the sandbox
    /// off) or `none` (every check could not run).
    pub world: &'static str,
}

/// The `hello` output line (without the newline).
pub fn hello_line(hello: &Hello) -> String {
    serde_json::to_string(&Line::Hello {
        protocol: PROTOCOL_MAJOR,
        version: env!("CARGO_PKG_VERSION"),
        policy: &hello.policy,
        haproxy: &hello.haproxy,
        sandbox: hello.sandbox,
        world: hello.world,
    })
    .expect("hello lines always serialize")
}

/// The output line for `output` (without the newline).
pub fn output_line(output: &Output) -> String {
    let line = match output {
        Output::Verdict(v) => Line::Verdict {
            plan: &v.plan,
            render: &v.render,
            checksum: v.checksum.as_str(),
            ok: matches!(v.outcome, CheckOutcome::Passed { .. }),
            refused: matches!(v.outcome, CheckOutcome::Refused { .. }),
            newest: v.newest,
            pinned: v.pinned.is_some(),
            remembered: v.remembered,
            message: v.outcome.message(),
            duration_ms: v.duration.as_millis() as u64,
            correlation: v.correlation.as_deref(),
        },
        Output::Latch(LatchState::Optimistic) => Line::Latch { state: "optimistic", reason: None },
        Output::Latch(LatchState::Pessimistic(reason)) => {
            Line::Latch { state: "pessimistic", reason: Some(reason.as_str()) }
        }
        Output::Release { plan, render } => Line::Release { plan, render },
        Output::Promote { promote: p, render } => {
            Line::Promote { pod: &p.pod, plan: &p.plan, render: render.as_deref() }
        }
        Output::Revert(r) => Line::Revert { pod: &r.pod, plan: &r.plan, to: revert_to(&r.target) },
        Output::Shadow(d) => {
            let (plan, pod) = match &d.trigger {
                ShadowTrigger::Verdict { plan } => (Some(plan.as_str()), None),
                ShadowTrigger::Applied { pod } => (None, Some(pod.as_str())),
            };
            Line::Shadow {
                trigger: d.trigger.kind(),
                plan,
                pod,
                live: ActionsLine::of(&d.live),
                shadow: ActionsLine::of(&d.shadow),
            }
        }
    };
    serde_json::to_string(&line).expect("output lines always serialize")
}

/// The `error` output line for a bad input line.
pub fn error_line(error: &LineError) -> String {
    serde_json::to_string(&Line::Error { line: error.line, message: &error.message })
        .expect("error lines always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Reason, Verdict};
    use crate::policy::Revert;
    use crate::render::FileKind;
    use std::time::Duration;

    #[test]
    fn hello_names_the_protocol_major_first_and_quotes_what_it_reports() {
        let hello = Hello {
            policy: "odd \"name\"".into(),
            haproxy: "2.6.12-1+deb12u4".into(),
            sandbox: "strict",
            world: "root",
        };
        let line = hello_line(&hello);
        assert!(line.starts_with(r#"{"type":"hello","protocol":1,"version":""#), "{line}");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["policy"], "odd \"name\"");
        assert_eq!(value["haproxy"], "2.6.12-1+deb12u4");
        assert_eq!(value["sandbox"], "strict");
        assert_eq!(value["world"], "root");
        assert_eq!(value["version"], env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn parses_every_input_type() {
        let line = r#"{"type":"rendered","plan":"plan-1","render":"r-1","correlation":"c-1","config":"global\n","files":[{"kind":"crt-list","path":"a.lst","content":"x"}],"extra":1}"#;
        let Some(Event::Rendered(r)) = parse_line(1, line).unwrap() else { panic!() };
        assert_eq!((r.plan(), r.id(), r.correlation()), ("plan-1", "r-1", Some("c-1")));
        assert_eq!(r.files()[0].kind, FileKind::CrtList);

        let Some(Event::Applied(a)) =
            parse_line(2, r#"{"type":"applied","pod":"ns/a","plan":"p","running_plan":null}"#)
                .unwrap()
        else {
            panic!()
        };
        assert_eq!((a.render, a.running_plan, a.baseline_plan), (None, None, None));
        assert!(matches!(
            parse_line(3, r#"{"type":"pod_terminated","pod":"ns/a"}"#),
            Ok(Some(Event::PodTerminated { .. }))
        ));
        assert!(matches!(
            parse_line(4, r#"{"type":"pods_discovered","pods":[]}"#),
            Ok(Some(Event::PodsDiscovered { .. }))
        ));
        assert!(matches!(
            parse_line(5, r#"{"type":"lost_leadership"}"#),
            Ok(Some(Event::LostLeadership))
        ));
        assert!(matches!(parse_line(6, "   "), Ok(None)));
    }

    #[test]
    fn the_fast_and_the_slow_way_read_every_valid_line_alike() {
        let lines = [
            r#"{"type":"applied","pod":"ns/a","plan":"p1","render":"r-1","running_plan":"p0","baseline_plan":null}"#,
            r#"{"plan":"p\u00e9\n","pod":"ns/\"b\"","type":"applied","extra":{"x":[1,2]}}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","correlation":"c","config":"global\n","files":[{"kind":"map","path":"maps/a.map","content":"x"}]}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","config":""}"#,
            r#"{"type":"pod_terminated","pod":"ns/a"}"#,
            r#"{"type":"pods_discovered","pods":["ns/a","ns/b"]}"#,
            r#"{"type":"lost_leadership","since":"now"}"#,
        ];
        for line in lines {
            let fast = parse_fields(line).unwrap_or_else(|| panic!("the fast way takes {line}"));
            let slow = parse_input(1, line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{line}");
        }
        // Names without escapes are borrowed from the line, not copied first.
        let f: Fields<'_> = serde_json::from_str(lines[0]).unwrap();
        assert!(matches!(f.pod.map(|t| t.0), Some(Cow::Borrowed("ns/a"))));
        // Lines the fast way declines, so the slow way can say what is wrong.
        for line in [
            r#"{"type":"applied","plan":"p1"}"#,
            r#"{"type":"applied","pod":null,"plan":"p1"}"#,
            r#"{"type":"applied","pod":5,"plan":"p1"}"#,
            r#"{"type":"bogus","pod":"ns/a"}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1"}"#,
            r#"{"pod":"ns/a"}"#,
            r#"["lost_leadership"]"#,
            r#"["applied","ns/a","p1"]"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","config":"","files":null}"#,
        ] {
            assert!(parse_fields(line).is_none(), "{line}");
            assert!(parse_line(1, line).is_err(), "{line}");
        }
    }

    #[test]
    fn bad_lines_name_the_line_and_the_problem() {
        let cases = [
            ("{not json", "not valid JSON"),
            (r#"{"type":"nope"}"#, "unknown type `nope`"),
            (r#"{"plan":"p"}"#, "missing field `type`"),
            (r#"{"type":"rendered","plan":"p","render":"r"}"#, "missing field `config`"),
            (
                r#"{"type":"applied","pod":"a","plan":7}"#,
                "invalid type: integer `7`, expected a string",
            ),
            (
                r#"{"type":"rendered","plan":"p","render":"r","config":"","files":[{"kind":"tls","path":"a","content":""}]}"#,
                "unknown variant `tls`",
            ),
            (r#"[1,2]"#, "expected a JSON object"),
            (r#"  [1,2"#, "not valid JSON"),
            (r#"{"type":"applied"} x"#, "not valid JSON"),
            (r#"{"type":5}"#, "field `type` must be a string, not 5"),
            (r#"{"type":{"a":[1]},"pod":"a"}"#, "field `type` must be a string, not an object"),
            (r#"{"type":"applied","type":"rendered"}"#, "duplicate field `type`"),
            (r#"{"type":"applied","pod":"a","plan":"p","pod":"b"}"#, "duplicate field `pod`"),
            (
                r#"{"type":"pods_discovered","pods":[1]}"#,
                "invalid type: integer `1`, expected a string",
            ),
            // a file is an object, its kind one of five names
            (
                r#"{"type":"rendered","plan":"p","render":"r","config":"","files":[["map","a.map","text","k v"]]}"#,
                "invalid type: sequence, expected a file object",
            ),
            (
                r#"{"type":"rendered","plan":"p","render":"r","config":"","files":[{"kind":{"map":null},"path":"a","content":""}]}"#,
                "invalid type: map, expected a string",
            ),
            (
                r#"{"type":"rendered","plan":"p","render":"r","config":"","files":[{"kind":5,"path":"a","content":""}]}"#,
                "invalid type: integer `5`, expected a string",
            ),
            // whitespace JSON does not have is no blank line
            ("\u{b}", "not valid JSON"),
            ("\u{a0}", "not valid JSON"),
            ("\u{2028}", "not valid JSON"),
        ];
        for (text, expected) in cases {
            let e = parse_line(7, text).unwrap_err();
            assert_eq!(e.line, 7);
            assert!(e.message.contains(expected), "{text}: {}", e.message);
        }
    }

    /// A `rendered` line with one file, `fields` spliced in after `kind`.
    fn one_file(fields: &str) -> String {
        format!(
            r#"{{"type":"rendered","plan":"p","render":"r","config":"global\n","files":[{{"kind":"cert","path":"ssl/a.ocsp",{fields}}}]}}"#
        )
    }

    fn rendered(line: &str) -> Render {
        match parse_line(1, line) {
            Ok(Some(Event::Rendered(r))) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn a_file_sent_as_text_or_as_base64_is_one_content_with_one_checksum() {
        let text = rendered(&one_file(r#""content":"k v\n/é""#));
        for fields in [
            r#""encoding":"base64","content":"ayB2Ci/DqQ==""#,
            r#""content":"ayB2Ci/DqQ==","encoding":"base64""#,
            // `/` escaped, as some encoders write it
            r#""encoding":"base64","content":"ayB2Ci\/DqQ==""#,
            r#""encoding":"text","content":"k v\n/\u00e9""#,
        ] {
            let line = one_file(fields);
            let r = rendered(&line);
            assert_eq!(r.files()[0].content, "k v\n/é".as_bytes(), "{line}");
            assert_eq!(r.checksum(), text.checksum(), "{line}");
            let slow = parse_input(1, &line).unwrap();
            assert_eq!(format!("{slow:?}"), format!("{:?}", Event::Rendered(r)), "{line}");
        }
        // Bytes that are not UTF-8 (DER), and other bytes: another checksum.
        let der = rendered(&one_file(r#""encoding":"base64","content":"MIIB/wAK""#));
        assert_eq!(der.files()[0].content, [0x30, 0x82, 0x01, 0xff, 0x00, 0x0a]);
        let other = rendered(&one_file(r#""encoding":"base64","content":"MIIB/gAK""#));
        assert_ne!(der.checksum(), other.checksum());
        assert_ne!(der.checksum(), text.checksum());
        let empty = rendered(&one_file(r#""encoding":"base64","content":"""#));
        assert_eq!(empty.checksum(), rendered(&one_file(r#""content":"""#)).checksum());
    }

    #[test]
    fn an_unknown_encoding_or_bad_base64_is_an_error_naming_the_line_and_the_problem() {
        let cases = [
            (
                r#""encoding":"hex","content":"00""#,
                "unknown variant `hex`, expected `text` or `base64`",
            ),
            (r#""encoding":"Base64","content":"AA==""#, "unknown variant `Base64`"),
            (r#""encoding":5,"content":"AA==""#, "invalid type: integer `5`"),
            (r#""encoding":null,"content":"AA==""#, "invalid type: null"),
            (r#""encoding":"base64","content":5"#, "invalid type: integer `5`, expected a string"),
            (r#""encoding":"base64""#, "missing field `content`"),
            (
                r#""encoding":"base64","content":"AA$A""#,
                r#"file "ssl/a.ocsp": `content` is not standard base64: '$' at offset 2 is not in its alphabet"#,
            ),
            (
                r#""encoding":"base64","content":"AAAA\nAAAA""#,
                "not standard base64: byte 0x0a at offset 4 is not in its alphabet",
            ),
            (r#""encoding":"base64","content":"AA""#, "the `=` padding is missing or wrong"),
            (r#""encoding":"base64","content":"AAAAA""#, "5 symbols do not make whole bytes"),
            (
                r#""encoding":"base64","content":"AB==""#,
                "the last symbol, 'B' at offset 1, has bits past the end",
            ),
        ];
        for (fields, expected) in cases {
            let line = one_file(fields);
            assert!(parse_fields(&line).is_none(), "{line}");
            let e = parse_line(9, &line).unwrap_err();
            assert_eq!(e.line, 9);
            assert!(e.message.contains(expected), "{line}: {}", e.message);
        }
        // A base64 string of UTF-8 text is read for its bytes, not as text.
        let r = rendered(&one_file(r#""encoding":"base64","content":"4pyT""#));
        assert_eq!(r.files()[0].content, "✓".as_bytes());
    }

    #[test]
    fn strings_read_in_one_copy_read_as_serde_json_reads_them() {
        let strings = [
            r#""""#,
            r#""plain""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u0041\u00e9\u20AC\ud83d\ude00 tail""#,
            r#""é ✓ 😀""#,
            r#""\ud83d""#,
            r#""\ud83dx""#,
            r#""\ud83d\n""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            "5",
            "-5",
            "1.5",
            "null",
            "true",
            "[1]",
            r#"{"a":1}"#,
        ];
        for raw in strings {
            let ours =
                serde_json::from_str::<OneCopy<'_>>(raw).map(|s| s.0).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<String>(raw).map_err(|e| e.to_string());
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{raw}"),
                // The same words; the column may differ (ours is reported after the value).
                (Err(a), Err(b)) => {
                    assert_eq!(a.split(" at line").next(), b.split(" at line").next(), "{raw}")
                }
                _ => panic!("{raw}: {ours:?} against {theirs:?}"),
            }
        }
    }

    #[test]
    fn a_huge_bad_value_gets_a_short_message_that_still_says_what_and_where() {
        let huge = "x".repeat(1 << 20);
        for (text, what) in [
            (format!(r#"{{"type":"{huge}"}}"#), "unknown type `xxx"),
            (
                format!(r#"{{"type":"pods_discovered","pods":"{huge}"}}"#),
                "invalid type: string \"xxx",
            ),
        ] {
            let e = parse_line(3, &text).unwrap_err();
            assert!(e.message.len() < 1024, "{}", e.message.len());
            assert!(
                e.message.starts_with(what) && e.message.contains("bytes cut"),
                "{}",
                e.message
            );
        }
        let e =
            parse_line(3, &format!(r#"{{"type":"pods_discovered","pods":"{huge}"}}"#)).unwrap_err();
        assert!(
            e.message.ends_with(&format!("at line 1 column {}", huge.len() + 35)),
            "{}",
            e.message
        );
        let e = parse_line(3, &format!(r#"{{"type":"{huge}é"}}"#)).unwrap_err();
        assert!(e.message.ends_with(
            "expected one of rendered, applied, pod_terminated, pods_discovered, lost_leadership"
        ));
    }

    #[test]
    fn output_lines_follow_the_protocol_field_order() {
        let v = Verdict {
            plan: "plan-1".into(),
            render: "r-1".into(),
            checksum: Render::new("p", "r", "", vec![]).checksum().clone(),
            correlation: Some("c-1".into()),
            outcome: CheckOutcome::Refused { message: "bad".into() },
            newest: true,
            pinned: Some(Reason::Refused),
            remembered: false,
            duration: Duration::from_millis(87),
        };
        let line = output_line(&Output::Verdict(v));
        let keys: Vec<&str> = line
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|k| {
                [
                    "type",
                    "plan",
                    "render",
                    "checksum",
                    "ok",
                    "refused",
                    "newest",
                    "pinned",
                    "remembered",
                    "message",
                    "duration_ms",
                    "correlation",
                ]
                .contains(k)
            })
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "plan",
                "render",
                "checksum",
                "ok",
                "refused",
                "newest",
                "pinned",
                "remembered",
                "message",
                "duration_ms",
                "correlation"
            ]
        );
        assert!(line.starts_with(
            r#"{"type":"verdict","plan":"plan-1","render":"r-1","checksum":"sha256:"#
        ));
        assert!(line.ends_with(r#""ok":false,"refused":true,"newest":true,"pinned":true,"remembered":false,"message":"bad","duration_ms":87,"correlation":"c-1"}"#));

        assert_eq!(
            output_line(&Output::Latch(LatchState::Pessimistic(Reason::Unavailable))),
            r#"{"type":"latch","state":"pessimistic","reason":"unavailable"}"#
        );
        assert_eq!(
            output_line(&Output::Latch(LatchState::Optimistic)),
            r#"{"type":"latch","state":"optimistic"}"#
        );
        let revert = Revert {
            pod: "ns/a".into(),
            plan: "plan-2".into(),
            target: RevertTarget::Plan("plan-1".into()),
        };
        assert_eq!(
            output_line(&Output::Revert(revert)),
            r#"{"type":"revert","pod":"ns/a","plan":"plan-2","to":"plan-1"}"#
        );
        assert_eq!(
            error_line(&LineError { line: 3, message: "x".into() }),
            r#"{"type":"error","line":3,"message":"x"}"#
        );
    }

    #[test]
    fn a_shadow_line_names_its_trigger_and_holds_both_decisions_with_line_fields() {
        use crate::policy::Promote;
        use crate::shadow::Difference;
        let revert =
            |to: RevertTarget| Revert { pod: "ns/a".into(), plan: "plan-2".into(), target: to };
        let verdict = Difference {
            trigger: ShadowTrigger::Verdict { plan: "plan-2".into() },
            live: Actions { promote: vec![], revert: vec![revert(RevertTarget::Baseline)] },
            shadow: Actions {
                promote: vec![],
                revert: vec![revert(RevertTarget::Plan("plan-1".into()))],
            },
        };
        assert_eq!(
            output_line(&Output::Shadow(verdict)),
            r#"{"type":"shadow","trigger":"verdict","plan":"plan-2","live":{"promote":[],"revert":[{"pod":"ns/a","plan":"plan-2","to":"baseline"}]},"shadow":{"promote":[],"revert":[{"pod":"ns/a","plan":"plan-2","to":"plan-1"}]}}"#
        );
        let applied = Difference {
            trigger: ShadowTrigger::Applied { pod: "ns/a".into() },
            live: Actions {
                promote: vec![Promote { pod: "ns/a".into(), plan: "plan-1".into() }],
                revert: vec![],
            },
            shadow: Actions::default(),
        };
        assert_eq!(
            output_line(&Output::Shadow(applied)),
            r#"{"type":"shadow","trigger":"applied","pod":"ns/a","live":{"promote":[{"pod":"ns/a","plan":"plan-1"}],"revert":[]},"shadow":{"promote":[],"revert":[]}}"#
        );
    }
}

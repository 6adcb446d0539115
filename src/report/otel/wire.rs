//! The OTLP/HTTP request bodies: `ExportTraceServiceRequest` as protobuf
//! (`http/protobuf`, the default) or as JSON (`http/json`), written by
//! hand. The messages and field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto` and `common/v1/common.proto`;
//! the JSON follows the OTLP JSON mapping (ids as hex, 64-bit integers as
//! strings, enums as numbers).

use serde_json::{Value, json};

use super::{AttrValue, Span};

/// The version of ybs, the instrumentation scope's version.
const SCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `ExportTraceServiceRequest` with one resource and one scope (`ybs`).
pub(super) fn json_body(resource: &[(String, AttrValue)], spans: &[Span]) -> Vec<u8> {
    let spans: Vec<Value> = spans.iter().map(json_span).collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": json_attributes(resource)},
        "scopeSpans": [{
            "scope": {"name": "ybs", "version": SCOPE_VERSION},
            "spans": spans,
        }],
    }]})
    .to_string()
    .into_bytes()
}

fn json_span(span: &Span) -> Value {
    let mut value = json!({
        "traceId": hex(&span.trace_id),
        "spanId": hex(&span.span_id),
        "name": span.name,
        "kind": span.kind as u8,
        "startTimeUnixNano": span.start_ns.to_string(),
        "endTimeUnixNano": span.end_ns.to_string(),
        "attributes": json_attributes(&span.attributes),
        "status": {"code": span.status.code()},
    });
    if let Some(parent) = &span.parent {
        value["parentSpanId"] = json!(hex(parent));
    }
    if let Some(message) = span.status.message() {
        value["status"]["message"] = json!(message);
    }
    if !span.events.is_empty() {
        value["events"] = span
            .events
            .iter()
            .map(|event| {
                json!({
                    "timeUnixNano": event.time_ns.to_string(),
                    "name": event.name,
                    "attributes": json_attributes(&event.attributes),
                })
            })
            .collect();
    }
    value
}

fn json_attributes(attributes: &[(String, AttrValue)]) -> Value {
    attributes
        .iter()
        .map(|(key, value)| {
            let value = match value {
                AttrValue::Str(text) => json!({"stringValue": text}),
                AttrValue::Int(number) => json!({"intValue": number.to_string()}),
                AttrValue::Bool(flag) => json!({"boolValue": flag}),
                AttrValue::Double(number) => json!({"doubleValue": number}),
            };
            json!({"key": key, "value": value})
        })
        .collect()
}

/// Lowercase hex, as OTLP JSON writes trace and span ids.
pub(super) use crate::core::text::hex;

/// The same request as protobuf.
pub(super) fn protobuf_body(resource: &[(String, AttrValue)], spans: &[Span]) -> Vec<u8> {
    let mut resource_message = Vec::new();
    for attribute in resource {
        message(&mut resource_message, 1, &key_value(attribute));
    }
    let mut scope = Vec::new();
    string(&mut scope, 1, "ybs");
    string(&mut scope, 2, SCOPE_VERSION);
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for span in spans {
        message(&mut scope_spans, 2, &protobuf_span(span));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource_message);
    message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn protobuf_span(span: &Span) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &span.trace_id);
    bytes(&mut out, 2, &span.span_id);
    if let Some(parent) = &span.parent {
        bytes(&mut out, 4, parent);
    }
    string(&mut out, 5, &span.name);
    varint_field(&mut out, 6, span.kind as u64);
    fixed64(&mut out, 7, span.start_ns);
    fixed64(&mut out, 8, span.end_ns);
    for attribute in &span.attributes {
        message(&mut out, 9, &key_value(attribute));
    }
    for event in &span.events {
        let mut encoded = Vec::new();
        fixed64(&mut encoded, 1, event.time_ns);
        string(&mut encoded, 2, &event.name);
        for attribute in &event.attributes {
            message(&mut encoded, 3, &key_value(attribute));
        }
        message(&mut out, 11, &encoded);
    }
    let mut status = Vec::new();
    if let Some(text) = span.status.message() {
        string(&mut status, 2, text);
    }
    if span.status.code() != 0 {
        varint_field(&mut status, 3, u64::from(span.status.code()));
    }
    message(&mut out, 15, &status);
    out
}

/// `KeyValue { key = 1; AnyValue value = 2 }`.
fn key_value((key, value): &(String, AttrValue)) -> Vec<u8> {
    let mut any = Vec::new();
    match value {
        AttrValue::Str(text) => string(&mut any, 1, text),
        AttrValue::Bool(flag) => varint_field(&mut any, 2, u64::from(*flag)),
        // int64: two's complement as a 64-bit varint.
        AttrValue::Int(number) => {
            varint_field(&mut any, 3, u64::from_ne_bytes(number.to_ne_bytes()))
        }
        AttrValue::Double(number) => {
            tag(&mut any, 4, 1);
            any.extend_from_slice(&number.to_le_bytes());
        }
    }
    let mut out = Vec::new();
    string(&mut out, 1, key);
    message(&mut out, 2, &any);
    out
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, 0);
    varint(out, value);
}

fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&value.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(out, field, 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    bytes(out, field, value);
}

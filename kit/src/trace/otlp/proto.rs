//! The protobuf encoding (feature `otlp`): the mapped spans as `opentelemetry-proto` types.

#[cfg(feature = "otlp")]
mod enabled {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{
        ResourceSpans, ScopeSpans, Span, Status, span, status,
    };

    use crate::trace::otlp::OtlpEncoder;
    use crate::trace::otlp::encode::{AttrValue, SpanData};
    use crate::trace::record::RunRecord;

    fn any(value: &AttrValue) -> any_value::Value {
        match value {
            AttrValue::Str(s) => any_value::Value::StringValue(s.clone()),
            AttrValue::Int(n) => any_value::Value::IntValue(*n),
            AttrValue::Double(x) => any_value::Value::DoubleValue(*x),
            AttrValue::Strs(list) => any_value::Value::ArrayValue(ArrayValue {
                values: list
                    .iter()
                    .map(|s| AnyValue {
                        value: Some(any_value::Value::StringValue(s.clone())),
                    })
                    .collect(),
            }),
        }
    }

    fn key_values(list: &[(String, AttrValue)]) -> Vec<KeyValue> {
        list.iter()
            .map(|(k, v)| KeyValue {
                key: k.clone(),
                value: Some(AnyValue {
                    value: Some(any(v)),
                }),
                ..Default::default()
            })
            .collect()
    }

    fn proto_span(s: SpanData) -> Span {
        Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: s.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            name: s.name,
            kind: if s.client {
                span::SpanKind::Client as i32
            } else {
                span::SpanKind::Internal as i32
            },
            start_time_unix_nano: s.start_time_unix_nano,
            end_time_unix_nano: s.end_time_unix_nano,
            attributes: key_values(&s.attributes),
            events: s
                .events
                .iter()
                .map(|e| span::Event {
                    time_unix_nano: e.time_unix_nano,
                    name: e.name.clone(),
                    attributes: key_values(&e.attributes),
                    dropped_attributes_count: 0,
                })
                .collect(),
            status: Some(match s.error {
                Some(message) => Status {
                    message,
                    code: status::StatusCode::Error as i32,
                },
                None => Status::default(),
            }),
            ..Default::default()
        }
    }

    impl OtlpEncoder {
        /// The request for a batch of runs: one `ResourceSpans` per environment, scope `kit`
        /// (feature `otlp`).
        ///
        /// ```
        /// use kit::trace::otlp::{OtlpEncoder, Profile, Protocol};
        /// use kit::trace::RunRecord;
        ///
        /// let run: RunRecord = serde_json::from_value(serde_json::json!({
        ///     "id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        ///     "trace_id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        ///     "name": "support", "kind": "agent", "start_ns": 1, "end_ns": 2, "status": "ok"
        /// }))?;
        /// let request = OtlpEncoder::new(Protocol::Protobuf, Profile::Otlp).request(&[run]);
        /// let span = &request.resource_spans[0].scope_spans[0].spans[0];
        /// assert_eq!(span.name, "invoke_agent support");
        /// # Ok::<(), serde_json::Error>(())
        /// ```
        pub fn request(&self, runs: &[RunRecord]) -> ExportTraceServiceRequest {
            let resource_spans = self
                .resources(runs)
                .into_iter()
                .map(|(resource, spans)| ResourceSpans {
                    resource: Some(Resource {
                        attributes: key_values(&resource),
                        ..Default::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "kit".into(),
                            version: env!("CARGO_PKG_VERSION").into(),
                            ..Default::default()
                        }),
                        spans: spans.into_iter().map(proto_span).collect(),
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                })
                .collect();
            ExportTraceServiceRequest { resource_spans }
        }

        /// The span of one run (feature `otlp`).
        pub fn span(&self, run: &RunRecord) -> Span {
            proto_span(self.span_data(run))
        }
    }

    pub(in crate::trace::otlp) fn partial_success(body: &[u8]) -> Option<(u64, String)> {
        let response: ExportTraceServiceResponse = prost::Message::decode(body).ok()?;
        let partial = response.partial_success?;
        Some((
            u64::try_from(partial.rejected_spans).unwrap_or(0),
            partial.error_message,
        ))
    }
}

#[cfg(feature = "otlp")]
pub(super) use enabled::partial_success;

/// Without the `otlp` feature nothing is sent as protobuf, so no protobuf answer comes back.
#[cfg(not(feature = "otlp"))]
pub(super) fn partial_success(_body: &[u8]) -> Option<(u64, String)> {
    None
}

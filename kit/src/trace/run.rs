//! Live runs, the tracer that owns the exporters, and the task-local current run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tracing::field::Empty;

use super::exporter::IntoExporter;
use super::exporter::{Exporter, ExporterStats};
use super::fields::custom_fields;
use super::options::TraceOptions;
use super::record::{ModelInfo, RunKind, RunRecord, RunStatus, ToolInfo};

/// The most characters of a run's error kept: a tool's or a peer's error text can be megabytes,
/// and a span that large is refused by collectors, losing the whole run.
const MAX_ERROR_CHARS: usize = 8000;
use super::redact::{redact_str, redact_value};
use crate::ids;

tokio::task_local! {
    static CURRENT: Run;
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Owns the exporters that finished runs go to. Cheap to clone.
///
/// A process has a global tracer ([`global`](super::global)), configured from the environment
/// on first use: `KIT_TRACE_FILE` (a JSON-lines file), `KIT_TRACE_ENDPOINT` +
/// `KIT_TRACE_API_KEY` (the queued OTLP exporter: protobuf with the `otlp` feature, OTLP/JSON
/// without). Replace it with [`set_global`](super::set_global), give a run its own with
/// `RunOptions::tracer`, or build one from a [`Config`](crate::Config) set in code with
/// [`Tracer::from_config`].
#[derive(Clone, Default)]
pub struct Tracer {
    exporters: Arc<Vec<Arc<dyn Exporter>>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("exporters", &self.exporters.len())
            .finish()
    }
}

impl Tracer {
    /// A tracer with no exporter (records nothing; `tracing` spans are still emitted).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an exporter (a value, or one already shared as `Arc<dyn Exporter>`).
    #[must_use]
    pub fn with_exporter(mut self, exporter: impl IntoExporter) -> Self {
        super::redact::warm_up();
        Arc::make_mut(&mut self.exporters).push(exporter.into_exporter());
        self
    }

    /// True when runs are recorded (at least one exporter).
    pub fn is_active(&self) -> bool {
        !self.exporters.is_empty()
    }

    /// True when both send to the very same exporters (one was cloned from the other).
    pub fn same_as(&self, other: &Tracer) -> bool {
        Arc::ptr_eq(&self.exporters, &other.exporters)
    }

    /// Waits until every exporter has delivered what it holds, at most `timeout` in all. True
    /// when everything got through.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = crate::deadline::from_now(timeout);
        self.exporters.iter().all(|e| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            e.flush(left)
        })
    }

    /// The counters of every exporter, summed.
    pub fn stats(&self) -> ExporterStats {
        let mut total = ExporterStats::default();
        for e in self.exporters.iter() {
            let s = e.stats();
            total.queued += s.queued;
            total.exported += s.exported;
            total.dropped += s.dropped;
            total.failed += s.failed;
        }
        total
    }

    /// Starts a root run (or a child of the current run, if there is one).
    ///
    /// `inputs` is only computed when the run is recorded.
    pub fn start(
        &self,
        name: &str,
        kind: RunKind,
        inputs: impl FnOnce() -> Value,
        options: Option<&TraceOptions>,
    ) -> Run {
        if options.is_some_and(|o| !o.is_enabled()) {
            return Run::disabled();
        }
        match current() {
            // `trace: false` above holds for everything under it.
            Some(parent) if parent.suppressed => Run::disabled(),
            Some(parent) if parent.is_recording() || !self.is_active() => {
                let run = parent.child(name, kind, inputs);
                if let Some(o) = options {
                    for (k, v) in &o.metadata {
                        run.add_metadata(k, v.clone());
                    }
                }
                run
            }
            _ => Run::root(self.clone(), name, kind, inputs, options),
        }
    }

    fn export(&self, record: RunRecord) {
        if let Some((last, rest)) = self.exporters.split_last() {
            for e in rest {
                e.export(record.clone());
            }
            last.export(record);
        }
    }

    /// A tracer configured from the environment (see the type's docs).
    pub fn from_env() -> Tracer {
        let mut tracer = Tracer::new();
        if let Ok(path) = std::env::var("KIT_TRACE_FILE") {
            match super::exporter::JsonLinesExporter::new(&path) {
                Ok(e) => tracer = tracer.with_exporter(e),
                Err(e) => {
                    tracing::warn!(path, error = %e, "kit: cannot open KIT_TRACE_FILE; traces are not written")
                }
            }
        }
        match super::otlp::OtlpExporter::from_env() {
            Ok(Some(e)) => tracer = tracer.with_exporter(e),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "kit: trace export is misconfigured; traces are not sent")
            }
        }
        tracer
    }
}

fn global_lock() -> &'static RwLock<Option<Tracer>> {
    static GLOBAL: OnceLock<RwLock<Option<Tracer>>> = OnceLock::new();
    GLOBAL.get_or_init(|| RwLock::new(None))
}

/// The process's tracer (configured from the environment on first use).
pub fn global() -> Tracer {
    if let Some(t) = global_lock()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        return t.clone();
    }
    let mut slot = global_lock().write().unwrap_or_else(|p| p.into_inner());
    slot.get_or_insert_with(Tracer::from_env).clone()
}

/// Replaces the process's tracer.
pub fn set_global(tracer: Tracer) {
    *global_lock().write().unwrap_or_else(|p| p.into_inner()) = Some(tracer);
}

/// A live run: a node of the trace tree being recorded. Cheap to clone.
///
/// When no exporter is configured the run records nothing, but its `tracing` span is still
/// emitted (target `kit`, with `otel.name` and `gen_ai.*` fields), so applications that use
/// `tracing` + OpenTelemetry see kit's work without configuring kit's exporter.
#[derive(Clone)]
pub struct Run {
    inner: Option<Arc<RunInner>>,
    span: tracing::Span,
    /// Suppressed by `trace: false`: so is everything started under it, nested graphs
    /// included.
    suppressed: bool,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Some(i) => {
                let record = lock(&i.record);
                f.debug_struct("Run")
                    .field("id", &record.id)
                    .field("name", &record.name)
                    .field("kind", &record.kind)
                    .finish()
            }
            None => f.write_str("Run(not recorded)"),
        }
    }
}

struct RunInner {
    tracer: Tracer,
    record: Mutex<RunRecord>,
    done: AtomicBool,
}

impl Drop for RunInner {
    /// A run dropped before it finished was cancelled: record that instead of losing it.
    fn drop(&mut self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            let mut record = lock(&self.record).clone();
            record.end_ns = now_ns();
            record.status = RunStatus::Error;
            record.error = Some("cancelled: the run was dropped before it finished".into());
            self.tracer.export(record);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn make_span(id: &str, kind: RunKind, name: &str) -> tracing::Span {
    let otel_kind = if kind == RunKind::Model {
        "client"
    } else {
        "internal"
    };
    let span = tracing::info_span!(
        target: "kit",
        "kit.run",
        otel.name = Empty,
        otel.kind = otel_kind,
        otel.status_code = Empty,
        otel.status_message = Empty,
        kit.run_id = id,
        kit.run_kind = kind.as_str(),
        gen_ai.operation.name = Empty,
        gen_ai.agent.name = Empty,
        gen_ai.provider.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.tool.call.id = Empty,
        gen_ai.conversation.id = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        let label = match kind {
            RunKind::Agent => format!("invoke_agent {name}"),
            RunKind::Graph => format!("invoke_workflow {name}"),
            RunKind::Tool => format!("execute_tool {name}"),
            _ => name.to_string(),
        };
        span.record("otel.name", label.as_str());
        match kind {
            RunKind::Agent => {
                span.record("gen_ai.operation.name", "invoke_agent");
                span.record("gen_ai.agent.name", name);
            }
            RunKind::Graph => {
                span.record("gen_ai.operation.name", "invoke_workflow");
            }
            RunKind::Tool => {
                span.record("gen_ai.operation.name", "execute_tool");
                span.record("gen_ai.tool.name", name);
            }
            RunKind::Model => {
                span.record("gen_ai.operation.name", "chat");
            }
            _ => {}
        }
    }
    span
}

fn clean(mut v: Value) -> Value {
    redact_value(&mut v);
    v
}

impl Run {
    /// A run that records nothing and emits no span: a suppressed run (`trace: false`),
    /// under which nothing is recorded either.
    pub fn disabled() -> Run {
        Run {
            inner: None,
            span: tracing::Span::none(),
            suppressed: true,
        }
    }

    /// True when the run was suppressed (`trace: false`), and everything under it is.
    pub fn is_suppressed(&self) -> bool {
        self.suppressed
    }

    fn root(
        tracer: Tracer,
        name: &str,
        kind: RunKind,
        inputs: impl FnOnce() -> Value,
        options: Option<&TraceOptions>,
    ) -> Run {
        let id = ids::time_ordered();
        let display = options
            .and_then(|o| o.name.clone())
            .unwrap_or_else(|| name.to_string());
        let span = make_span(&id, kind, &display);
        if !tracer.is_active() {
            return Run {
                inner: None,
                span,
                suppressed: false,
            };
        }
        let o = options.cloned().unwrap_or_default();
        let mut metadata = o.metadata.clone();
        redact_map(&mut metadata);
        let record = RunRecord {
            trace_id: id.clone(),
            id,
            parent_id: None,
            name: display,
            kind,
            start_ns: now_ns(),
            end_ns: 0,
            status: RunStatus::Ok,
            error: None,
            inputs: clean(inputs()),
            outputs: Value::Null,
            metadata,
            tags: Vec::new(),
            thread_id: o.thread_id.clone(),
            user_id: o.user_id.clone(),
            session_id: o.session_id.clone(),
            execution_mode: o.execution_mode.clone(),
            environment: o.environment.clone(),
            custom_fields: custom_fields(&o.fields),
            model: None,
            tool: None,
        };
        if let Some(thread) = &record.thread_id {
            span.record("gen_ai.conversation.id", thread.as_str());
        }
        Run {
            inner: Some(Arc::new(RunInner {
                tracer,
                record: Mutex::new(record),
                done: AtomicBool::new(false),
            })),
            span,
            suppressed: false,
        }
    }

    /// A child run. `inputs` is only computed when the run is recorded.
    #[must_use]
    pub fn child(&self, name: &str, kind: RunKind, inputs: impl FnOnce() -> Value) -> Run {
        if self.suppressed {
            return Run::disabled();
        }
        let Some(parent) = &self.inner else {
            let span = if self.span.is_disabled() {
                tracing::Span::none()
            } else {
                let _enter = self.span.enter();
                make_span("", kind, name)
            };
            return Run {
                inner: None,
                span,
                suppressed: false,
            };
        };
        let id = ids::time_ordered();
        let span = {
            let _enter = self.span.enter();
            make_span(&id, kind, name)
        };
        let p = lock(&parent.record);
        let record = RunRecord {
            id,
            trace_id: p.trace_id.clone(),
            parent_id: Some(p.id.clone()),
            name: name.to_string(),
            kind,
            start_ns: now_ns(),
            end_ns: 0,
            status: RunStatus::Ok,
            error: None,
            inputs: clean(inputs()),
            outputs: Value::Null,
            metadata: Map::new(),
            tags: Vec::new(),
            // Children inherit the trace's dimensions.
            thread_id: p.thread_id.clone(),
            user_id: p.user_id.clone(),
            session_id: p.session_id.clone(),
            execution_mode: p.execution_mode.clone(),
            environment: p.environment.clone(),
            custom_fields: p.custom_fields.clone(),
            model: None,
            tool: None,
        };
        if let Some(thread) = &record.thread_id {
            span.record("gen_ai.conversation.id", thread.as_str());
        }
        drop(p);
        Run {
            inner: Some(Arc::new(RunInner {
                tracer: parent.tracer.clone(),
                record: Mutex::new(record),
                done: AtomicBool::new(false),
            })),
            span,
            suppressed: false,
        }
    }

    /// True when this run is recorded (an exporter will receive it).
    pub fn is_recording(&self) -> bool {
        self.inner.is_some()
    }

    /// The run's id, when recorded.
    pub fn id(&self) -> Option<String> {
        self.inner.as_ref().map(|i| lock(&i.record).id.clone())
    }

    /// The trace's id (the root run's id), when recorded.
    pub fn trace_id(&self) -> Option<String> {
        self.inner
            .as_ref()
            .map(|i| lock(&i.record).trace_id.clone())
    }

    /// The `tracing` span mirroring this run.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    fn with_record(&self, f: impl FnOnce(&mut RunRecord)) {
        if let Some(i) = &self.inner {
            f(&mut lock(&i.record));
        }
    }

    /// Renames the run (a model run answered by another model than the one it was opened
    /// for, say).
    pub fn set_name(&self, name: &str) {
        self.with_record(|r| r.name = name.to_string());
    }

    /// Changes what the run is (e.g. a graph node that is a middleware hook).
    pub fn set_kind(&self, kind: RunKind) {
        self.with_record(|r| r.kind = kind);
    }

    /// Adds a metadata entry (redacted).
    pub fn add_metadata(&self, key: &str, value: Value) {
        self.with_record(|r| {
            let mut value = value;
            if super::redact::is_secret_key(key) {
                value = Value::String(super::redact::REDACTED.into());
            } else {
                redact_value(&mut value);
            }
            r.metadata.insert(key.to_string(), value);
        });
    }

    /// Adds tags.
    pub fn add_tags(&self, tags: impl IntoIterator<Item = String>) {
        self.with_record(|r| r.tags.extend(tags));
    }

    /// Records model details (and mirrors them on the `tracing` span).
    pub fn set_model(&self, info: ModelInfo) {
        if !self.span.is_disabled() {
            self.span
                .record("gen_ai.provider.name", info.provider.as_str());
            self.span
                .record("gen_ai.request.model", info.model.as_str());
            self.span
                .record("otel.name", format!("chat {}", info.model).as_str());
            if let Some(u) = info.usage {
                self.span
                    .record("gen_ai.usage.input_tokens", u.input_tokens);
                self.span
                    .record("gen_ai.usage.output_tokens", u.output_tokens);
            }
        }
        self.with_record(|r| {
            let mut info = info;
            let mut params = Value::Object(std::mem::take(&mut info.params));
            redact_value(&mut params);
            if let Value::Object(p) = params {
                info.params = p;
            }
            r.model = Some(info);
        });
    }

    /// Records tool details.
    pub fn set_tool(&self, info: ToolInfo) {
        if !self.span.is_disabled() {
            self.span
                .record("gen_ai.tool.call.id", info.call_id.as_str());
        }
        self.with_record(|r| r.tool = Some(info));
    }

    /// Ends the run successfully with these outputs (redacted).
    pub fn finish(&self, outputs: Value) {
        // Redacting the outputs walks them: not for a run nobody records.
        if self.inner.is_some() {
            self.end(clean(outputs), None);
        }
    }

    /// Ends the run as failed with this error (redacted).
    pub fn fail(&self, error: &str) {
        // Redacted whole (a secret cut in two would escape the patterns), then clipped: the
        // error goes into the span, its status and its exception event, for every exporter.
        let error = crate::text::clip(&redact_str(error), MAX_ERROR_CHARS);
        if !self.span.is_disabled() {
            self.span.record("otel.status_code", "ERROR");
            self.span.record("otel.status_message", error.as_str());
            self.span.record("error.type", "_OTHER");
        }
        self.end(Value::Null, Some(error));
    }

    fn end(&self, outputs: Value, error: Option<String>) {
        let Some(i) = &self.inner else {
            return;
        };
        if i.done.swap(true, Ordering::SeqCst) {
            return;
        }
        let record = {
            let mut r = lock(&i.record);
            r.end_ns = now_ns();
            if let Some(e) = error {
                r.status = RunStatus::Error;
                r.error = Some(e);
            }
            // The run is done: its inputs go to the exporters without a copy (the live record
            // keeps its ids, names and dimensions for `id()`, `trace_id()` and children).
            let inputs = std::mem::take(&mut r.inputs);
            let mut record = r.clone();
            record.inputs = inputs;
            if !outputs.is_null() {
                record.outputs = outputs;
            }
            record
        };
        i.tracer.export(record);
    }

    /// Runs `fut` with this run as the current one (children attach to it; its `tracing`
    /// span is entered while the future is polled).
    ///
    /// Not an `async fn`: one would hold `fut` twice in its state, once as its argument and
    /// once inside the task-local wrapper (the executor's future doubled in size).
    pub fn scope<F: std::future::Future>(
        self,
        fut: F,
    ) -> impl std::future::Future<Output = F::Output> {
        use tracing::Instrument;
        let span = self.span.clone();
        CURRENT.scope(self, fut.instrument(span))
    }
}

fn redact_map(map: &mut Map<String, Value>) {
    let mut v = Value::Object(std::mem::take(map));
    redact_value(&mut v);
    if let Value::Object(m) = v {
        *map = m;
    }
}

/// The run the current task is inside, if any.
pub fn current() -> Option<Run> {
    CURRENT.try_with(Run::clone).ok()
}

//! An MCP server's tool as a kit [`Tool`]: the schema passed through, the call sent to the
//! server, and its result mapped to a tool result.
//!
//! * **Arguments.** The tool's `inputSchema` is the kit tool's parameters, so the model sees it
//!   and [`Tool::execute`] checks the arguments against it before anything is sent.
//! * **Results.** Text blocks become text, images become image parts, embedded text resources
//!   become text headed by their URI; audio, binary resources and resource links are described
//!   in a line of text (models take no audio in tool results). `structuredContent` is sent as
//!   JSON text when the server sent no text. `isError: true` becomes an error result.
//! * **Failures.** A timeout, a server that exited or closed the connection, and a protocol
//!   error each become an error result saying what happened and what the model can do. The
//!   call never panics and never hangs past the timeout.
//! * **Tracing.** Each call is a child run of the tool run, named `tools/call <tool>` with the
//!   server in its name and metadata (`mcp_server`, `mcp_method`, `mcp_tool`,
//!   `mcp_protocol_version`).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};

use super::client::Inner;
use crate::message::{Content, ContentPart, ToolStatus};
use crate::tool::{DynTool, Tool, ToolContext, ToolError, ToolOutput};
use crate::trace::RunKind;

/// The longest tool description kept from a server, in characters (the rest is cut).
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 4096;

/// The longest tool name a provider takes.
const MAX_NAME_CHARS: usize = 64;

/// A kit tool name for an MCP tool: the characters providers accept (`[A-Za-z0-9_-]`, others
/// become `_`), at most 64, with the server's name in front when `prefix` is set.
pub(crate) fn kit_name(server: &str, tool: &str, prefix: bool) -> String {
    let raw = if prefix {
        format!("{server}_{tool}")
    } else {
        tool.to_string()
    };
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME_CHARS)
        .collect();
    if name.is_empty() {
        name.push('_');
    }
    name
}

/// The kit tools of a server's list, each under its own name (see [`unique_names`]).
pub(crate) fn to_kit_tools(client: &Arc<Inner>, remote: &[rmcp::model::Tool]) -> Vec<Tool> {
    let prefix = client.options.prefix_tool_names;
    let names = unique_names(
        remote
            .iter()
            .map(|t| kit_name(&client.name, &t.name, prefix)),
    );
    remote
        .iter()
        .zip(names)
        .map(|(tool, name)| to_kit_tool(client, tool, name))
        .collect()
}

/// Tells apart names that read the same once cut to what providers accept (`a.b` and `a_b`,
/// or two long names sharing their first 64 characters) by a number (`a_b_2`), in list order,
/// instead of failing as duplicates. One pass, however many names are equal.
fn unique_names(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    // The number each name tries next.
    let mut tried: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    names
        .map(|base| {
            let mut name = base.clone();
            let n = tried.entry(base.clone()).or_insert(1);
            while taken.contains(&name) {
                *n += 1;
                let suffix = format!("_{}", *n);
                let keep = MAX_NAME_CHARS.saturating_sub(suffix.len());
                // The name is ASCII (see `kit_name`), so a byte count is a character count.
                name = format!("{}{suffix}", base.get(..keep).unwrap_or(&base));
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// The kit tool for one tool of a server, under `name`.
fn to_kit_tool(client: &Arc<Inner>, tool: &rmcp::model::Tool, name: String) -> Tool {
    let description: String = tool
        .description
        .as_deref()
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    let schema = Value::Object((*tool.input_schema).clone());
    Tool::new(
        name,
        description,
        schema,
        McpTool {
            client: client.clone(),
            remote_name: tool.name.to_string(),
        },
    )
    .with_max_result_chars(client.options.max_result_chars)
    .tags(["mcp"])
    .trace_metadata("mcp_server", client.name.clone())
    .trace_metadata("mcp_tool", tool.name.to_string())
}

/// Calls one tool of one server.
struct McpTool {
    client: Arc<Inner>,
    /// The tool's name on the server (the kit name may differ).
    remote_name: String,
}

#[async_trait::async_trait]
impl DynTool for McpTool {
    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let server = &self.client.name;
        let run = crate::trace::start_run(
            &format!("tools/call {} @ {server}", self.remote_name),
            RunKind::Custom,
            args.clone(),
            Some(
                json!({
                    "mcp_server": server,
                    "mcp_method": "tools/call",
                    "mcp_tool": self.remote_name,
                    "mcp_protocol_version": self.client.protocol_version(),
                })
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ),
        );
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let params = CallToolRequestParams::new(Cow::Owned(self.remote_name.clone()))
            .with_arguments(arguments);
        let outcome = self.client.call_tool(params).await;
        match outcome {
            Ok(result) => {
                let output = map_result(result);
                if output.status == ToolStatus::Error {
                    run.fail(&format!(
                        "the tool answered with isError: {}",
                        crate::text::clip(&output.content.text(), 500)
                    ));
                } else {
                    run.finish(json!({ "result": output.content }));
                }
                Ok(output)
            }
            Err(message) => {
                run.fail(&message);
                Err(ToolError::Failed(message))
            }
        }
    }
}

/// The most base64 bytes of images kept from one tool result (Anthropic takes images up to
/// 5 MB; every later model call of the thread sends them again).
const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// An image block as an image part, when every provider takes it: PNG, JPEG, GIF or WebP, as
/// valid base64, within [`MAX_IMAGE_BYTES`] for the result (`kept` counts them). Any other
/// becomes a line of text saying why it is not shown: one the provider refused would fail every
/// later model call of the thread.
fn image_part(mime_type: String, data: String, kept: &mut usize) -> ContentPart {
    let lower = mime_type.trim().to_ascii_lowercase();
    let media = match lower.as_str() {
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" => lower,
        "image/jpg" => "image/jpeg".to_string(),
        _ => {
            return ContentPart::text(format!(
                "[image ({}) not shown: models take PNG, JPEG, GIF and WebP]",
                crate::text::clip(&mime_type, 100)
            ));
        }
    };
    if !is_base64(&data) {
        return ContentPart::text(format!(
            "[image ({media}) not shown: its data is not base64]"
        ));
    }
    if kept.saturating_add(data.len()) > MAX_IMAGE_BYTES {
        return ContentPart::text(format!(
            "[image ({media}, {} bytes of base64) not shown: the result's images would pass \
             {MAX_IMAGE_BYTES} bytes]",
            data.len()
        ));
    }
    *kept += data.len();
    ContentPart::image_base64(media, data)
}

/// Whether `data` is base64 (standard alphabet, padded or not, no whitespace): a length
/// that leaves one character over is no encoding, and padding fills a group of four.
fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    let padding = data.len() - body.len();
    padding <= 2
        && !body.is_empty()
        && body.len() % 4 != 1
        && (padding == 0 || data.len().is_multiple_of(4))
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// A server's answer as a tool result.
pub(crate) fn map_result(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<ContentPart> = Vec::new();
    let mut image_bytes = 0usize;
    for block in result.content {
        match block {
            ContentBlock::Text(t) => parts.push(ContentPart::text(t.text)),
            ContentBlock::Image(i) => parts.push(image_part(i.mime_type, i.data, &mut image_bytes)),
            ContentBlock::Audio(a) => parts.push(ContentPart::text(format!(
                "[audio ({}, {} bytes of base64) not shown: models take no audio in tool results]",
                a.mime_type,
                a.data.len()
            ))),
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(ContentPart::text(format!("[resource {uri}]\n{text}")));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(ContentPart::text(format!(
                    "[binary resource {uri} ({}, {} bytes of base64) not shown]",
                    mime_type.as_deref().unwrap_or("unknown type"),
                    blob.len()
                ))),
                other => parts.push(ContentPart::text(format!(
                    "[resource not shown: {}]",
                    crate::text::clip(&serde_json::to_string(&other).unwrap_or_default(), 200)
                ))),
            },
            ContentBlock::ResourceLink(link) => parts.push(ContentPart::text(format!(
                "[resource link: {} <{}>{}]",
                link.name,
                link.uri,
                link.description
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default()
            ))),
            other => parts.push(ContentPart::text(format!(
                "[content block not shown: {}]",
                crate::text::clip(&serde_json::to_string(&other).unwrap_or_default(), 200)
            ))),
        }
    }
    let has_text = parts
        .iter()
        .any(|p| matches!(p, ContentPart::Text { text } if !text.is_empty()));
    if !has_text && let Some(structured) = result.structured_content {
        parts.push(ContentPart::text(structured.to_string()));
    }
    let content = if parts.iter().all(|p| matches!(p, ContentPart::Text { .. })) {
        let texts: Vec<String> = parts
            .into_iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text),
                _ => None,
            })
            .collect();
        Content::Text(texts.join("\n"))
    } else {
        Content::Parts(parts)
    };
    ToolOutput {
        content,
        status: if result.is_error == Some(true) {
            ToolStatus::Error
        } else {
            ToolStatus::Success
        },
        update: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_what_providers_accept() {
        assert_eq!(kit_name("fs", "read_file", false), "read_file");
        assert_eq!(kit_name("fs", "read.file/v2", false), "read_file_v2");
        assert_eq!(kit_name("fs", "read", true), "fs_read");
        assert_eq!(kit_name("s", &"x".repeat(100), false).len(), 64);
        assert_eq!(kit_name("s", "", false), "_");
    }

    #[test]
    fn names_equal_once_cut_are_numbered_in_list_order() {
        let long = |c: char| format!("{}{c}", "x".repeat(70));
        let names = unique_names(
            ["a.b", "a_b", "c", "a/b", "a_b_2", &long('1'), &long('2')]
                .iter()
                .map(|n| kit_name("s", n, false)),
        );
        let cut = "x".repeat(64);
        let second = format!("{}_2", "x".repeat(62));
        assert_eq!(
            names,
            [
                "a_b",
                "a_b_2",
                "c",
                "a_b_3",
                "a_b_2_2",
                cut.as_str(),
                second.as_str()
            ]
        );
        assert!(names.iter().all(|n| n.len() <= 64));
        // Many equal names: each distinct, in one pass.
        let many = unique_names(std::iter::repeat_n("t".to_string(), 5000));
        let distinct: std::collections::HashSet<&String> = many.iter().collect();
        assert_eq!(distinct.len(), 5000);
        assert_eq!(many[4999], "t_5000");
        // Names that differ are left alone.
        assert_eq!(
            unique_names(["p", "q"].map(String::from).into_iter()),
            ["p", "q"]
        );
    }

    /// Images every provider takes are kept; any other type, data that is not base64, and
    /// images past the result's budget become a line of text, at 1 KiB as at 1 MiB.
    #[test]
    fn only_images_providers_take_are_kept() {
        let kept = |blocks: Vec<ContentBlock>| -> Vec<String> {
            match map_result(CallToolResult::success(blocks)).content {
                Content::Parts(parts) => parts
                    .iter()
                    .map(|p| match p {
                        ContentPart::Text { text } => text.clone(),
                        ContentPart::Image { .. } => "image".to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect(),
                Content::Text(text) => vec![text],
            }
        };
        for size in [1 << 10, 1 << 20] {
            let data = "iVBO".repeat(size / 4);
            let shown = kept(vec![
                ContentBlock::image(data.clone(), "image/png"),
                ContentBlock::image(data.clone(), "IMAGE/JPG"),
                ContentBlock::image(data.clone(), "image/svg+xml"),
                ContentBlock::image(format!("{data}!"), "image/png"),
                ContentBlock::image("", "image/png"),
            ]);
            assert_eq!(shown[..2], ["image", "image"], "{size}");
            assert!(shown[2].contains("image/svg+xml") && shown[2].contains("not shown"));
            assert!(shown[3].contains("not base64"), "{}", shown[3]);
            assert!(shown[4].contains("not base64"), "{}", shown[4]);
        }
        // Six images of 1 MiB: five fit the 5 MiB budget.
        let data = "A".repeat(1 << 20);
        let shown = kept(
            (0..6)
                .map(|_| ContentBlock::image(data.clone(), "image/webp"))
                .collect(),
        );
        assert_eq!(shown.iter().filter(|s| *s == "image").count(), 5);
        assert!(shown[5].contains("not shown"), "{}", shown[5]);
        assert!(is_base64("aGk=") && is_base64("aGk") && is_base64("aGVsbG8="));
        for bad in ["a===", "a b", "a", "aGVsb", "aGk==", "="] {
            assert!(!is_base64(bad), "{bad}");
        }
    }

    #[test]
    fn text_blocks_join_and_is_error_is_an_error() {
        let mut result =
            CallToolResult::error(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        result.structured_content = Some(json!({"ignored": true}));
        let out = map_result(result);
        assert_eq!(out.status, ToolStatus::Error);
        assert_eq!(out.content, Content::Text("a\nb".into()));
    }

    #[test]
    fn images_are_parts_and_structured_content_stands_in_for_missing_text() {
        let out = map_result(CallToolResult::success(vec![ContentBlock::image(
            "AAAA",
            "image/png",
        )]));
        assert_eq!(
            out.content,
            Content::Parts(vec![ContentPart::image_base64("image/png", "AAAA")])
        );
        let mut only_structured = CallToolResult::success(vec![]);
        only_structured.structured_content = Some(json!({"temp": 21}));
        assert_eq!(
            map_result(only_structured).content,
            Content::Text("{\"temp\":21}".into())
        );
    }
}

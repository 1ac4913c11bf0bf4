//! Requests a browser makes from another site are refused before anything else: a web page
//! may send a worker on the same machine a "simple" cross-site POST (`text/plain`, no CORS
//! preflight) that starts a run with tools, and a worker without auth would take it.
//!
//! Browsers name the page's site in `Origin` on every request that is not a plain GET, and
//! mark a cross-site one `Sec-Fetch-Site: cross-site`; clients that are not browsers (SDKs,
//! curl) send neither, and are not affected. A page whose own name was made to resolve to
//! this machine (DNS rebinding) is same-origin to the browser, so a browser's request is taken
//! only for a loopback host (`localhost`, `127.x.x.x`, `[::1]`): the worker serves no pages,
//! so no page of another host has a reason to call it.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::routes::ApiError;

/// Refuses a request that changes something (any method but GET, HEAD and OPTIONS) when a
/// browser says it comes from another site.
pub(super) async fn refuse_cross_site(request: Request, next: Next) -> Response {
    let reads = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !reads && let Some(origin) = foreign_origin(&request) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!(
                "a request from the web page at {origin} was refused: a browser may not make \
                 a worker act for another site; call the worker from a server or a client, \
                 not from a page"
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// The origin a browser named when it is not the worker's own (by its `Host`), or when the
/// browser marked the request cross-site.
fn foreign_origin(request: &Request) -> Option<String> {
    let headers = request.headers();
    let cross_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"));
    let origin = headers.get(header::ORIGIN)?;
    let shown = crate::text::clip(&String::from_utf8_lossy(origin.as_bytes()), 200);
    if cross_site {
        return Some(shown);
    }
    let Ok(origin) = origin.to_str() else {
        return Some(shown);
    };
    // `null` (a sandboxed page, a file) or `scheme://host[:port]`.
    let host_of_origin = origin.split_once("://").map(|(_, rest)| rest);
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (host_of_origin, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) && is_loopback(h) => None,
        _ => Some(shown),
    }
}

/// Whether a `Host` header (`name[:port]`) names this machine by loopback.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_hosts_with_and_without_ports() {
        for host in [
            "localhost",
            "LOCALHOST:8123",
            "127.0.0.1:9",
            "127.3.4.5",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "rebind.evil:8123",
            "10.0.0.1:80",
            "[::2]:80",
            "localhost.evil",
            "",
            ":80",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}

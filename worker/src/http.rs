//! Small pieces of HTTP shared by the routes: the incoming request, replies
//! built in Rust and handed to the runtime in one call, and the error reply.
//! With `app`, `origin`, `visitor` and `rest`, the only modules that touch
//! JS-backed types.
//!
//! Every value that crosses between wasm and JS costs glue, and that glue
//! was a third of the worker's CPU per request (BENCHMARKS.md, "The worker
//! under workerd"). So a request reads from the runtime only what routing
//! and identity need, and a reply we build is a Rust value until it is
//! handed over whole.

use std::cell::{OnceCell, RefCell};

use queuegate_edge::cookie::{clear_cookie, VISITOR_COOKIE};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Method};

use crate::error::EdgeError;

/// The incoming request. Its method, path and headers are read from the
/// runtime on demand, and its body only by the route that reads one.
#[derive(Debug)]
pub struct Request {
    raw: web_sys::Request,
    line: RequestLine,
    path: String,
    headers: OnceCell<web_sys::Headers>,
}

/// The method and URL as the runtime spells them, and the `Cookie` and
/// `Authorization` headers (every queue route reads the one identity
/// needs), read in one call: the text the runtime gave, and where each
/// part lies in it (one allocation, not four).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RequestLine {
    text: String,
    method: std::ops::Range<usize>,
    url: std::ops::Range<usize>,
    cookies: std::ops::Range<usize>,
    authorization: std::ops::Range<usize>,
}

impl RequestLine {
    /// The method, as sent (`QUERY` stays `QUERY`).
    pub fn method(&self) -> &str {
        &self.text[self.method.clone()]
    }

    /// The absolute URL (owned, as `web_sys::Request::url` gives it, so
    /// the routes read it the same way).
    pub fn url(&self) -> String {
        self.url_str().to_string()
    }

    /// The absolute URL.
    pub fn url_str(&self) -> &str {
        &self.text[self.url.clone()]
    }

    fn cookies(&self) -> &str {
        &self.text[self.cookies.clone()]
    }

    fn authorization(&self) -> &str {
        &self.text[self.authorization.clone()]
    }

    /// Parses [`js::request_line`]'s
    /// `"<METHOD> <url>\n<cookie>\n<authorization>"` (an URL from the
    /// runtime holds no space or line break, a header value no line break).
    fn parse(text: String) -> RequestLine {
        // The line up to `\n` from `from`, and where the next one starts.
        let line = |from: usize| match text[from..].find('\n') {
            Some(i) => (from..from + i, from + i + 1),
            None => (from..text.len(), text.len()),
        };
        let (head, next) = line(0);
        let (cookies, next) = line(next);
        let authorization = next..text.len();
        let (method, url) = match text[head.clone()].find(' ') {
            Some(i) => (0..i, i + 1..head.end),
            None => (head.clone(), head.end..head.end),
        };
        RequestLine {
            method,
            url,
            cookies,
            authorization,
            text,
        }
    }
}

impl Request {
    /// Wraps the runtime's request (reads its method and URL).
    pub fn new(raw: web_sys::Request) -> Request {
        let line = RequestLine::parse(js::request_line(&raw));
        let path = queuegate_edge::url::path(line.url_str()).to_string();
        Request {
            raw,
            line,
            path,
            headers: OnceCell::new(),
        }
    }

    /// The method as workers-rs reads it (an unknown one reads as GET).
    pub fn method(&self) -> Method {
        Method::from(self.line.method().to_string())
    }

    /// The path, without the query.
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// The `Cookie` header, or empty.
    pub fn cookies(&self) -> &str {
        self.line.cookies()
    }

    /// The `Authorization` header, or empty.
    pub fn authorization(&self) -> &str {
        self.line.authorization()
    }

    /// The request's headers.
    pub fn headers(&self) -> &web_sys::Headers {
        self.headers.get_or_init(|| self.raw.headers())
    }

    /// The method and URL as the runtime gave them (where workers-rs'
    /// `inner()` would ask the runtime again each time).
    pub fn inner(&self) -> &RequestLine {
        &self.line
    }

    /// The runtime's request (to forward it).
    pub fn raw(&self) -> &web_sys::Request {
        &self.raw
    }

    /// A copy whose body is the runtime's tee of this one's
    /// (`Request.clone()`), to read it and still forward this one; None if
    /// the runtime refuses (a body already read).
    pub fn tee(&self) -> Option<Request> {
        // The inherent `clone`: the runtime's, not `Clone::clone` (another
        // handle on the same request).
        self.raw.clone().ok().map(Request::new)
    }

    /// The body as text (read once: the runtime refuses a second read).
    pub async fn text(&self) -> Result<String, EdgeError> {
        let promise = self.raw.text().map_err(|e| read_err(&e))?;
        JsFuture::from(promise)
            .await
            .map_err(|e| read_err(&e))?
            .as_string()
            .ok_or_else(|| EdgeError::Internal("the body is not text".into()))
    }
}

/// A body that could not be read, as an internal error.
fn read_err(e: &worker::wasm_bindgen::JsValue) -> EdgeError {
    EdgeError::Internal(format!("the body could not be read: {e:?}"))
}

/// Header names and values of a reply we build, kept in Rust until the
/// reply is handed over: already in the form [`js::reply`] reads (names
/// and values one a line, alternating), so handing them over copies
/// nothing and adding one allocates nothing new.
#[derive(Debug, Default)]
pub struct ReplyHeaders(RefCell<String>);

impl ReplyHeaders {
    /// Replaces every value of `name`.
    fn set_header(&self, name: &str, value: &str) {
        let mut head = self.0.borrow_mut();
        if head
            .split('\n')
            .step_by(2)
            .any(|n| n.eq_ignore_ascii_case(name))
        {
            let mut kept = String::with_capacity(head.len());
            for (n, v) in pairs(&head) {
                if !n.eq_ignore_ascii_case(name) {
                    push_pair(&mut kept, n, v);
                }
            }
            *head = kept;
        }
        push_pair(&mut head, name, value);
    }

    /// Adds a value of `name`.
    fn append_header(&self, name: &str, value: &str) {
        push_pair(&mut self.0.borrow_mut(), name, value);
    }
}

/// Adds a name and its value to `head`.
fn push_pair(head: &mut String, name: &str, value: &str) {
    if !head.is_empty() {
        head.push('\n');
    }
    head.push_str(name);
    head.push('\n');
    head.push_str(value);
}

/// The names and values in `head`.
fn pairs(head: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut lines = head.split('\n').filter(|_| !head.is_empty());
    std::iter::from_fn(move || Some((lines.next()?, lines.next().unwrap_or(""))))
}

/// A reply: one we build (status, headers, text), or one the runtime gave
/// us (the origin's).
#[derive(Debug)]
pub struct Response {
    status: u16,
    headers: ReplyHeaders,
    body: Body,
}

#[derive(Debug)]
enum Body {
    Text(String),
    Runtime(web_sys::Response),
}

impl Response {
    /// A reply with a text body and its content type.
    pub fn text(status: u16, content_type: &str, body: String) -> Response {
        let headers = ReplyHeaders::default();
        headers.append_header("content-type", content_type);
        Response {
            status,
            headers,
            body: Body::Text(body),
        }
    }

    /// This JSON reply with `name: value` added as its object's last
    /// member; unchanged when it is not a JSON object we built, or `value`
    /// cannot be written. Written into the text, not read and written
    /// again: the reply is ours, and `name` not yet in it.
    pub fn with_json_field(mut self, name: &str, value: &impl serde::Serialize) -> Response {
        if let Body::Text(text) = &mut self.body {
            let object = text.starts_with('{') && text.ends_with('}');
            if let (true, Ok(name), Ok(value)) = (
                object,
                serde_json::to_string(name),
                serde_json::to_string(value),
            ) {
                text.pop();
                if text.len() > 1 {
                    text.push(',');
                }
                text.push_str(&name);
                text.push(':');
                text.push_str(&value);
                text.push('}');
            }
        }
        self
    }

    /// A 200 HTML page.
    pub fn from_html(html: String) -> Response {
        Response::text(200, "text/html; charset=utf-8", html)
    }

    /// The status code.
    pub fn status_code(&self) -> u16 {
        self.status
    }

    /// The headers to send (for a runtime reply: added to its own).
    pub fn headers(&self) -> &ReplyHeaders {
        &self.headers
    }

    /// Takes a header of the origin's reply away: its value, if it had
    /// one; the visitor's copy of the reply goes without it. None for a
    /// reply we built.
    pub fn take_origin_header(&self, name: &str) -> Option<String> {
        let Body::Runtime(resp) = &self.body else {
            return None;
        };
        let value = resp.headers().get(name).ok().flatten()?;
        // A name marked '-' is deleted from the copy (js::with_headers).
        self.headers.append_header(&format!("-{name}"), "");
        Some(value)
    }

    /// The runtime's `Response`: a reply we built in one call into JS.
    pub fn into_runtime(self) -> Result<web_sys::Response, EdgeError> {
        let headers = self.headers.0.into_inner();
        match self.body {
            Body::Text(text) => js::reply(self.status, &text, &headers)
                .map_err(|_| EdgeError::Internal("the runtime refused a reply".into())),
            Body::Runtime(resp) if headers.is_empty() => Ok(resp),
            // A fetched reply's headers are immutable: a copy of the reply
            // (the body streams through, not copied) takes ours.
            Body::Runtime(resp) => js::with_headers(&resp, &headers)
                .map_err(|_| EdgeError::Internal("the runtime refused a reply".into())),
        }
    }
}

impl From<web_sys::Response> for Response {
    fn from(resp: web_sys::Response) -> Response {
        Response {
            status: resp.status(),
            headers: ReplyHeaders::default(),
            body: Body::Runtime(resp),
        }
    }
}

/// A JSON reply with `Cache-Control: no-store` (queue state is personal).
/// The body is written straight to text, with no `serde_json::Value` (and
/// its map) built on the way.
pub fn json(status: u16, body: &impl serde::Serialize) -> Result<Response, EdgeError> {
    let text = serde_json::to_string(body).map_err(|e| EdgeError::Internal(e.to_string()))?;
    let resp = Response::text(status, "application/json; charset=utf-8", text);
    resp.headers.set_header("cache-control", "no-store");
    Ok(resp)
}

/// Sets a header (on a reply we build or an outbound request's headers).
pub fn set(headers: &ReplyHeaders, name: &str, value: &str) {
    headers.set_header(name, value);
}

/// Adds a header (Set-Cookie may repeat).
pub fn append(headers: &ReplyHeaders, name: &str, value: &str) {
    headers.append_header(name, value);
}

/// `303 See Other` to `location` (a path on this site, URL-safe), never
/// cached, varying with `Accept` (JSON clients get the refusal instead).
pub fn see_other(location: &str) -> Result<Response, EdgeError> {
    let resp = Response::text(
        303,
        "text/html; charset=utf-8",
        format!("<!doctype html><a href=\"{location}\">The waiting room</a>\n"),
    );
    set(resp.headers(), "location", location);
    set(resp.headers(), "cache-control", "no-store");
    set(resp.headers(), "vary", "accept");
    Ok(resp)
}

/// The reply for an error (the cause logged when it is the server's,
/// never sent).
pub fn error_response(e: &EdgeError) -> Result<Response, EdgeError> {
    if e.is_server_fault() {
        worker::console_error!("{} {}: {e}", e.status(), e.code());
    }
    let build = || -> Result<Response, EdgeError> {
        let resp = json(e.status(), &e.body())?;
        if let Some(s) = e.retry_after_s() {
            set(resp.headers(), "retry-after", &s.to_string());
        }
        if let Some(allow) = e.allow() {
            set(resp.headers(), "allow", &allow);
        }
        if e.sends_to_room() {
            // A browser asking for HTML got a 303 to the room instead
            // (app.rs): caches must keep the two apart.
            set(resp.headers(), "vary", "accept");
        }
        if matches!(e, EdgeError::IdentityInvalid(_)) {
            // Drop the bad visitor cookie, so the next enter mints a new one.
            append(resp.headers(), "set-cookie", &clear_cookie(VISITOR_COOKIE));
        }
        Ok(resp)
    };
    build()
}

/// The JS side: what a route reads of a request, and the runtime's
/// `Response`, each in one call.
mod js {
    use worker::{wasm_bindgen, web_sys};

    #[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function request_line(req) {
  const h = req.headers;
  return req.method + " " + req.url + "\n" + (h.get("cookie") ?? "") + "\n" + (h.get("authorization") ?? "");
}

export function reply(status, body, head) {
  const headers = new Headers();
  if (head.length > 0) {
    const h = head.split("\n");
    for (let i = 1; i < h.length; i += 2) headers.append(h[i - 1], h[i]);
  }
  return new Response(body, { status, headers });
}

export function with_headers(resp, head) {
  const copy = new Response(resp.body, resp);
  const h = head.split("\n");
  for (let i = 1; i < h.length; i += 2) {
    if (h[i - 1].startsWith("-")) copy.headers.delete(h[i - 1].slice(1));
    else copy.headers.append(h[i - 1], h[i]);
  }
  return copy;
}
"#)]
    extern "C" {
        /// `"<METHOD> <url>\n<Cookie header>\n<Authorization header>"`
        /// of a request.
        pub fn request_line(req: &web_sys::Request) -> String;

        /// A copy of `resp` (same status, headers and body stream) with
        /// `head`'s headers added (a name starting with '-': that header
        /// deleted).
        #[wasm_bindgen(catch)]
        pub fn with_headers(
            resp: &web_sys::Response,
            head: &str,
        ) -> Result<web_sys::Response, wasm_bindgen::JsValue>;

        /// `new Response(body, {status, headers})`; `head` is the headers'
        /// names and values, one a line, alternating.
        #[wasm_bindgen(catch)]
        pub fn reply(
            status: u16,
            body: &str,
            head: &str,
        ) -> Result<web_sys::Response, wasm_bindgen::JsValue>;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_line_splits_into_method_url_cookies_and_authorization() {
        let parse = |text: &str| RequestLine::parse(text.to_string());
        let line = parse("GET http://h/queue/position?queue=a\nqg_visitor=x.y; b=c d");
        assert_eq!(line.method(), "GET");
        assert_eq!(line.url(), "http://h/queue/position?queue=a");
        assert_eq!(line.cookies(), "qg_visitor=x.y; b=c d");
        assert_eq!(line.authorization(), "");
        let bare = parse("QUERY http://h/\n\n");
        assert_eq!(
            (
                bare.method(),
                bare.url_str(),
                bare.cookies(),
                bare.authorization()
            ),
            ("QUERY", "http://h/", "", "")
        );
        let signed_in = parse("GET http://h/\na=b\nBearer x.y.z");
        assert_eq!(
            (signed_in.cookies(), signed_in.authorization()),
            ("a=b", "Bearer x.y.z")
        );
        let no_cookie = parse("GET http://h/\n\nBearer x.y.z");
        assert_eq!(
            (no_cookie.cookies(), no_cookie.authorization()),
            ("", "Bearer x.y.z")
        );
        // Whatever the runtime hands over, nothing panics.
        for odd in ["", "GET", "GET http://h/", "\n", "\n\n", " \n \n "] {
            let l = parse(odd);
            let _ = (l.method(), l.url_str(), l.cookies(), l.authorization());
        }
        assert_eq!(parse("GET http://h/").url_str(), "http://h/");
    }

    #[test]
    fn a_json_field_is_added_as_the_objects_last_member() {
        let text = |r: Response| match r.body {
            Body::Text(t) => t,
            Body::Runtime(_) => unreachable!("a text reply"),
        };
        let receipt = serde_json::json!({"place": 3, "proof": ["ab"]});
        let added = json(200, &serde_json::json!({"state": "waiting", "position": 2}))
            .unwrap()
            .with_json_field("receipt", &receipt);
        let v: serde_json::Value = serde_json::from_str(&text(added)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"state": "waiting", "position": 2, "receipt": receipt})
        );
        let empty = Response::text(200, "application/json", "{}".into()).with_json_field("a", &1);
        assert_eq!(text(empty), r#"{"a":1}"#);
        let not_object = Response::text(200, "application/json", "[1]".into());
        assert_eq!(text(not_object.with_json_field("a", &1)), "[1]");
    }

    #[test]
    fn reply_headers_set_replaces_and_append_adds() {
        let resp = json(200, &serde_json::json!({"a": 1})).unwrap();
        set(resp.headers(), "Cache-Control", "max-age=1");
        append(resp.headers(), "set-cookie", "a=1");
        append(resp.headers(), "set-cookie", "b=2");
        set(resp.headers(), "vary", "accept");
        set(resp.headers(), "VARY", "accept-language");
        let head = resp.headers().0.borrow().clone();
        assert_eq!(
            pairs(&head).collect::<Vec<_>>(),
            [
                ("content-type", "application/json; charset=utf-8"),
                ("Cache-Control", "max-age=1"),
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("VARY", "accept-language"),
            ]
        );
        assert_eq!(pairs("").count(), 0);
        // A value may be empty (a deletion mark of an origin's header).
        assert_eq!(pairs("-x\n").collect::<Vec<_>>(), [("-x", "")]);
    }
}

//! Staff bypass links (docs/scheduler.md, *Bypass links*): opening one
//! sets its cookie; with the cookie, the gate forwards without a token.

use queuegate_edge::cookie::{cookie, set_cookie, BYPASS_COOKIE};
use queuegate_edge::{navigation, url};
use queuegate_shared::ops::{Bypass, BypassCall, BypassReply};
use queuegate_shared::QueueKeys;

use super::App;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};
use crate::rest::RestClient;

impl App {
    /// `GET /queue/bypass?queue=&key=[&return=]`: a live bypass link sets
    /// its cookie and leads on (to `return`, else `CONTINUE_URL`); any
    /// other is 403 `bypass_invalid`, and a key that is not a key's shape
    /// is refused before Redis is asked.
    pub(super) async fn open_bypass(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, _) = self.queue(req)?;
        let own_url = req.inner().url();
        let back = url::query_param(&own_url, "return")
            .map(navigation::return_target)
            .transpose()
            .map_err(|e| EdgeError::BadRequest(e.to_string()))?;
        let key = url::query_param(&own_url, "key").unwrap_or_default();
        let parts = queuegate_shared::bypass::parts(key).ok_or_else(|| {
            EdgeError::BadRequest("`key` is not a bypass key (qgb_ and 64 hex digits)".into())
        })?;
        let keys = QueueKeys::new(&self.config.prefix, &queue);
        let reply = self
            .redis()?
            .run(&Bypass {
                keys: &keys,
                call: BypassCall::Check(&parts),
            })
            .await?;
        let BypassReply::Live { expires_ms, .. } = reply else {
            return Err(EdgeError::BypassInvalid(format!("{reply:?}")));
        };
        let max_age = expires_ms.saturating_sub(crate::clock::now_ms()) / 1000;
        let cookie = set_cookie(
            BYPASS_COOKIE,
            &format!("{}.{key}", queue.as_str()),
            max_age.max(1),
            self.config.cookie_secure,
        );
        let location = back.unwrap_or_else(|| self.config.page.continue_url.clone());
        let resp = Response::text(303, "text/plain; charset=utf-8", "See Other\n".into());
        http::set(resp.headers(), "location", &location);
        http::set(resp.headers(), "cache-control", "no-store");
        http::set(resp.headers(), "referrer-policy", "no-referrer");
        http::append(resp.headers(), "set-cookie", &cookie);
        Ok(resp)
    }

    /// A live bypass cookie for `queue` in `cookies`: the link's id after
    /// counting this use, or None (no cookie, another queue's, or a link
    /// no longer live: the request then goes through the gate as any).
    pub(super) async fn bypass_in(
        &self,
        redis: &RestClient,
        keys: &QueueKeys,
        cookies: &str,
    ) -> Result<Option<String>, EdgeError> {
        let Some(value) = cookie(cookies, BYPASS_COOKIE) else {
            return Ok(None);
        };
        let Some(parts) = value
            .split_once('.')
            .filter(|(q, _)| *q == keys.queue().as_str())
            .and_then(|(_, key)| queuegate_shared::bypass::parts(key))
        else {
            return Ok(None);
        };
        let reply = redis
            .run(&Bypass {
                keys,
                call: BypassCall::Use(&parts),
            })
            .await?;
        Ok(matches!(reply, BypassReply::Live { .. }).then_some(parts.id))
    }
}

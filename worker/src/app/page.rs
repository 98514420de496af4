//! `GET /queue`: the waiting-room page in the visitor's language, with its
//! security headers ([`crate::page`] renders it). A person's form `POST`
//! that must wait for their turn gets the same page, keeping the form.

use queuegate_edge::visit::KeptForm;
use queuegate_edge::{navigation, url};
use queuegate_shared::QueueId;

use super::App;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};

impl App {
    /// The page of `?queue=`, its Continue leading back to `?return=`.
    pub(super) async fn page(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, _) = self.queue(req)?;
        // Where Continue leads: the path the visitor was sent here from
        // (checked to be a path on this site), else CONTINUE_URL.
        let own_url = req.inner().url();
        let back = url::query_param(&own_url, "return")
            .map(navigation::return_target)
            .transpose()
            .map_err(|e| EdgeError::BadRequest(e.to_string()))?;
        let accept_language = req.headers().get("accept-language").ok().flatten();
        self.room(
            &own_url,
            &queue,
            back.as_deref(),
            accept_language.as_deref(),
            None,
        )
        .await
    }

    /// The room of `queue` asked for at `own_url`, Continue leading to
    /// `back` (else `CONTINUE_URL`), and with `form` the form to send again
    /// there.
    pub(super) async fn room(
        &self,
        own_url: &str,
        queue: &QueueId,
        back: Option<&str>,
        accept_language: Option<&str>,
        form: Option<&KeptForm>,
    ) -> Result<Response, EdgeError> {
        let turnstile = self.config.guard.turnstile.as_ref();
        let choice = queuegate_edge::lang::choose(accept_language, crate::i18n::CODES);
        let files = crate::page::files(choice.lang).await?;
        let html = crate::page::render(
            &files,
            &self.config.page,
            queue.as_str(),
            back,
            turnstile,
            &choice,
            form,
        );
        // The shop's token script, as a CSP source: this site's origin
        // (as the visitor asked for it) and the configured path.
        let page = &self.config.page;
        let script_url = page
            .token_script
            .as_ref()
            .and_then(|path| Some(format!("{}{path}", url::origin(own_url)?)));
        let token = script_url
            .as_deref()
            .map(|script_url| crate::page::TokenSources {
                script_url,
                connect: &page.token_connect,
            });
        let resp = Response::from_html(html);
        let h = resp.headers();
        http::set(h, "cache-control", "no-store");
        http::set(
            h,
            "content-security-policy",
            &crate::page::content_security_policy(
                &files.template,
                turnstile.map(|t| t.script_origin()),
                token,
            ),
        );
        http::set(h, "x-content-type-options", "nosniff");
        http::set(h, "referrer-policy", "no-referrer");
        http::set(h, "content-language", choice.lang);
        http::set(h, "vary", "accept-language");
        Ok(resp)
    }
}

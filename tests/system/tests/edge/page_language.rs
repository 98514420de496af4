//! The page in the visitor's language (issue 25): chosen by
//! `Accept-Language` among the built-in translations, English otherwise;
//! `lang`, `<noscript>` and the locale for numbers and times follow it;
//! `PAGE_TEXTS` overrides every language or one; a bad `PAGE_TEXTS` stops
//! the worker with the reason. Issue 36: the title in each language,
//! Traditional Chinese for zh-TW and zh-HK, and a shop's token script that
//! the CSP allows as one file. The wasm under workerd.

use queuegate_shared::Settings;
use queuegate_system_tests::edge::EdgeStack;
use queuegate_testkit::RedisServer;

async fn page(
    stack: &EdgeStack,
    accept_language: Option<&str>,
) -> (u16, String, Vec<(String, String)>) {
    let mut req = reqwest::Client::new().get(format!("{}/queue?queue=main", stack.worker.url()));
    if let Some(l) = accept_language {
        req = req.header("accept-language", l);
    }
    let resp = req.send().await.expect("the page");
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    (status, resp.text().await.unwrap_or_default(), headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The JSON inside `<script type="application/json" id="{id}">`.
fn script_json(html: &str, id: &str) -> serde_json::Value {
    let open = format!(r#"<script type="application/json" id="{id}">"#);
    let start = html
        .find(&open)
        .map(|i| i + open.len())
        .expect("the element");
    let end = html[start..].find("</script>").expect("its end") + start;
    serde_json::from_str(&html[start..end]).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_speaks_the_visitors_language_and_the_operators_words() {
    let stack = EdgeStack::start_with(
        Settings::default(),
        "anonymous",
        RedisServer::start(),
        &[(
            "PAGE_TEXTS",
            r#"{"continue":"Go to checkout","de":{"continue":"Zur Kasse"}}"#,
        )],
    )
    .await;

    let (status, html, headers) = page(&stack, Some("ko-KR,ko;q=0.9,en-US;q=0.8")).await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"<html lang="ko">"#));
    assert_eq!(header(&headers, "content-language"), Some("ko"));
    assert_eq!(header(&headers, "vary"), Some("accept-language"));
    let texts = script_json(&html, "qg-texts");
    assert_eq!(
        texts["waiting"],
        "이 페이지를 열어 두세요. 자동으로 업데이트됩니다."
    );
    assert!(texts["seconds"]
        .as_str()
        .unwrap_or_default()
        .contains("{n}"));
    let config = script_json(&html, "qg-config");
    assert_eq!(config["locale"], "ko-KR");
    // The operator's text for every language, its German one for German.
    assert_eq!(config["texts"]["continue"], "Go to checkout");
    let noscript = html.split("<noscript><p>").nth(1).unwrap_or_default();
    assert!(noscript.starts_with("이 대기실을 이용하려면"), "{noscript}");

    let (_, html, headers) = page(&stack, Some("de-AT, en;q=0.5")).await;
    assert!(html.contains(r#"<html lang="de">"#));
    assert_eq!(header(&headers, "content-language"), Some("de"));
    assert_eq!(
        script_json(&html, "qg-config")["texts"]["continue"],
        "Zur Kasse"
    );
    assert_eq!(script_json(&html, "qg-config")["locale"], "de-AT");

    // Every built-in language, and English for the rest; the title in
    // each (the stack sets no PAGE_TITLE).
    for (asked, lang, title) in [
        ("ja-JP", "ja", "待合室"),
        ("fr-CA", "fr", "Salle d’attente"),
        ("es-419", "es", "Sala de espera"),
        ("pt-BR", "pt", "Sala de espera"),
        ("zh-CN", "zh", "等候室"),
        ("zh-TW", "zh-Hant", "等候室"),
        ("zh-HK", "zh-Hant", "等候室"),
        ("zh-Hant", "zh-Hant", "等候室"),
        ("ko-KR", "ko", "대기실"),
        ("en-GB", "en", "Waiting room"),
        ("sv-SE", "en", "Waiting room"),
    ] {
        let (_, html, headers) = page(&stack, Some(asked)).await;
        assert!(
            html.contains(&format!(r#"<html lang="{lang}">"#)),
            "{asked}"
        );
        assert_eq!(header(&headers, "content-language"), Some(lang), "{asked}");
        assert!(
            html.contains(&format!("<title>{title}</title>")),
            "{asked}: {}",
            html.lines()
                .find(|l| l.contains("<title>"))
                .unwrap_or_default()
        );
    }
    // German: the operator's German title text (PAGE_TEXTS) is not set,
    // so the language's own.
    let (_, html, _) = page(&stack, Some("de")).await;
    assert!(html.contains("<title>Warteraum</title>"), "German title");
    // Traditional Chinese, not Simplified, for Taiwan and Hong Kong.
    let (_, html, _) = page(&stack, Some("zh-TW,zh;q=0.8")).await;
    let texts = script_json(&html, "qg-texts");
    assert_eq!(texts["waiting"], "請保持此頁面開啟，頁面會自動更新。");
    assert_eq!(script_json(&html, "qg-config")["locale"], "zh-TW");
    assert!(html.contains("<noscript><p>此等候室需要 JavaScript"));
    let (_, html, _) = page(&stack, Some("zh-CN")).await;
    assert_eq!(
        script_json(&html, "qg-texts")["waiting"],
        "请保持此页面打开，页面会自动更新。"
    );
    let (_, html, _) = page(&stack, None).await;
    assert!(html.contains(r#"<html lang="en">"#));
    assert_eq!(script_json(&html, "qg-texts"), serde_json::json!({}));
    assert!(html.contains("<noscript><p>This waiting room needs JavaScript"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_text_that_names_nothing_stops_the_worker_with_the_reason() {
    let stack = EdgeStack::start_with(
        Settings::default(),
        "anonymous",
        RedisServer::start(),
        &[("PAGE_TEXTS", r#"{"wating":"typo"}"#)],
    )
    .await;
    let (status, body, _) = page(&stack, None).await;
    assert_eq!(status, 500, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["error"], "misconfigured");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_title_per_language_and_a_token_script_the_csp_allows_as_one_file() {
    let stack = EdgeStack::start_with(
        Settings::default(),
        "jwt",
        RedisServer::start(),
        &[
            ("PAGE_TITLE", "Drop & Co"),
            ("PAGE_TEXTS", r#"{"ja":{"title":"ドロップ待合室"}}"#),
            ("PAGE_TOKEN_SCRIPT", "/auth/queuegate-token.js"),
            ("PAGE_TOKEN_CONNECT", "https://clerk.shop.example"),
        ],
    )
    .await;
    let (status, html, headers) = page(&stack, Some("ja")).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("<title>ドロップ待合室</title>"),
        "the operator's Japanese title"
    );
    let (_, html, _) = page(&stack, Some("de")).await;
    assert!(
        html.contains("<title>Drop &amp; Co</title>"),
        "PAGE_TITLE elsewhere"
    );
    let config = script_json(&html, "qg-config");
    assert_eq!(config["signedIn"], true);
    assert_eq!(config["tokenScript"], "/auth/queuegate-token.js");
    // The CSP: the one file from this site, the login service's origin
    // for its fetches, nothing else.
    let csp = header(&headers, "content-security-policy").unwrap_or_default();
    let directive = |name: &str| {
        csp.split(';')
            .map(str::trim)
            .find(|d| d.starts_with(name))
            .unwrap_or_default()
            .to_string()
    };
    let script_src = directive("script-src ");
    assert!(
        script_src.ends_with(&format!("' {}/auth/queuegate-token.js", stack.worker.url())),
        "{csp}"
    );
    assert_eq!(script_src.split_whitespace().count(), 3, "{csp}");
    assert_eq!(
        directive("connect-src "),
        "connect-src 'self' https://clerk.shop.example"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_script_that_is_not_a_path_of_this_site_stops_the_worker_with_the_reason() {
    let stack = EdgeStack::start_with(
        Settings::default(),
        "jwt",
        RedisServer::start(),
        &[("PAGE_TOKEN_SCRIPT", "https://cdn.example/token.js")],
    )
    .await;
    let (status, body, _) = page(&stack, None).await;
    assert_eq!(status, 500, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["error"], "misconfigured");
    // The reason stays in the worker's log, never in the reply; the
    // config's unit tests check its words.
    assert!(!body.contains("PAGE_TOKEN_SCRIPT"), "{body}");
}

//! `url::path_and_query` and `url::query_param`: never panic on any URL;
//! the path is a fragment-free piece of the URL starting with `/`; on a
//! URL built from parts, every parameter reads back as its first value.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use queuegate_edge::url::{path_and_query, query_param};

#[derive(Debug, Arbitrary)]
struct Input {
    raw_url: String,
    raw_name: String,
    host: String,
    path: String,
    params: Vec<(String, Option<String>)>,
    fragment: Option<String>,
}

fn without(s: &str, bad: &[char]) -> String {
    s.chars().filter(|c| !bad.contains(c)).collect()
}

fuzz_target!(|input: Input| {
    let pq = path_and_query(&input.raw_url);
    assert!(pq.starts_with('/'), "{pq:?}");
    assert!(!pq.contains('#'));
    assert!(pq == "/" || input.raw_url.contains(pq));
    if let Some(v) = query_param(&input.raw_url, &input.raw_name) {
        assert!(!v.contains('&') && !v.contains('#'));
        assert!(pq.contains(v));
    }

    let host = without(&input.host, &['/', '?', '#']);
    let path = without(&input.path, &['?', '#']);
    let params: Vec<(String, Option<String>)> = input
        .params
        .iter()
        .map(|(k, v)| {
            let k = without(k, &['&', '=', '#']);
            (k, v.as_deref().map(|v| without(v, &['&', '#'])))
        })
        .collect();
    let mut url = format!("https://{host}/{path}");
    if !params.is_empty() {
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => k.clone(),
            })
            .collect();
        url.push('?');
        url.push_str(&query.join("&"));
    }
    if let Some(f) = &input.fragment {
        url.push('#');
        url.push_str(f);
    }
    let pq = path_and_query(&url);
    let expected_pq = url[url.find("://").unwrap() + 3..]
        .split_once('/')
        .map(|(_, rest)| format!("/{}", rest.split('#').next().unwrap()))
        .unwrap();
    assert_eq!(pq, expected_pq, "{url:?}");
    for (k, _) in &params {
        let first = params
            .iter()
            .find(|(k2, _)| k2 == k)
            .map(|(_, v)| v.clone().unwrap_or_default());
        assert_eq!(
            query_param(&url, k).map(str::to_string),
            first,
            "{url:?} {k:?}"
        );
    }
});

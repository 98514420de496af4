//! The page's languages and text keys (`assets/i18n/*.json`, checked at
//! build by build.rs): read by the page and by the config that overrides
//! its texts, so neither reaches into the other for them.

include!(concat!(env!("OUT_DIR"), "/i18n.rs"));

#[cfg(test)]
mod tests {
    #[test]
    fn a_notice_can_be_given_in_exactly_the_pages_languages() {
        let mut page: Vec<&str> = super::CODES.to_vec();
        let mut notice: Vec<&str> = queuegate_shared::notice::LANGUAGES.to_vec();
        page.sort_unstable();
        notice.sort_unstable();
        assert_eq!(
            page, notice,
            "worker/assets/i18n/ and shared/src/notice.rs LANGUAGES"
        );
        assert_eq!(super::CODES[0], "en");
    }
}

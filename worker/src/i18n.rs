//! The page's languages and text keys (`assets/i18n/*.json`, checked at
//! build by build.rs): read by the page and by the config that overrides
//! its texts, so neither reaches into the other for them.

include!(concat!(env!("OUT_DIR"), "/i18n.rs"));

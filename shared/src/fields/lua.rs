//! The Lua locals and tables each script starts with, generated from the
//! declarations in the parent module (one source for both languages).

use super::*;

/// The queue states as Lua locals (`QS_OPEN = 'open'` …).
fn queue_states() -> impl Iterator<Item = (String, &'static str)> {
    [
        QueueState::Open,
        QueueState::Paused,
        QueueState::Draining,
        QueueState::Closed,
    ]
    .into_iter()
    .map(|s| {
        (
            format!("QS_{}", s.as_str().to_ascii_uppercase()),
            s.as_str(),
        )
    })
}

/// Every local the Lua header can declare, in a fixed order: (name, Lua
/// value).
fn lua_declarations() -> Vec<(String, String)> {
    let strings = crate::keys::name::ALL
        .iter()
        .chain(config::ALL)
        .chain(stats::ALL)
        .chain(status::ALL)
        .chain(guard_field::ALL)
        .chain(group_field::ALL)
        .chain(commit::ALL)
        .chain(origin::ALL)
        .map(|(n, v)| (n.to_string(), *v))
        .chain(queue_states())
        .map(|(name, value)| (name, format!("'{value}'")));
    let indexes = token_record::ALL
        .iter()
        .chain(status_record::ALL)
        .chain(&[("REPLY_KIND", records::KIND)])
        .map(|(name, index)| (name.to_string(), index.to_string()));
    let read: Vec<String> = records::CONFIG_READ
        .iter()
        .map(|f| format!("'{f}'"))
        .collect();
    let levels: Vec<String> = crate::guard::LEVEL_FROM
        .iter()
        .map(|(n, d)| format!("{{n = {n}, d = {d}}}"))
        .collect();
    let edges: Vec<String> = ORIGIN_LATENCY_EDGES_MS.iter().map(u64::to_string).collect();
    let constants = [
        ("SEP", format!("'{SEPARATOR}'")),
        ("ORIGIN_LATENCY_EDGES", format!("{{{}}}", edges.join(", "))),
        ("ORIGIN_BUCKET_MS", ORIGIN_BUCKET_MS.to_string()),
        ("ORIGIN_KEEP_MS", ORIGIN_KEEP_MS.to_string()),
        ("ROUND_SPAN", DRAW_ROUND_SPAN.to_string()),
        ("MAX_ROUND", DRAW_MAX_ROUND.to_string()),
        ("PER_56", crate::guard::address::PER_56.to_string()),
        ("PER_48", crate::guard::address::PER_48.to_string()),
        ("PLACES_KEEP_MS", PLACES_KEEP_MS.to_string()),
        ("DS_PENDING", format!("'{DRAW_SHUFFLE_PENDING}'")),
        ("DS_DEALT", format!("'{DRAW_SHUFFLE_DEALT}'")),
        ("DC_PENDING", format!("'{COMMIT_PENDING}'")),
        ("DC_REVEALED", format!("'{COMMIT_REVEALED}'")),
        ("FULL_HOLD_MS", ADDRESS_FULL_HOLD_MS.to_string()),
        ("LIVENESS_MARGIN", crate::snapshot::MAX_AGE_MS.to_string()),
        (
            "SESSION_CAP_MS",
            crate::settings::SESSION_CAP_MS.to_string(),
        ),
        (
            "RATE_BUCKET_TICKS",
            crate::ops::RATE_BUCKET_TICKS.to_string(),
        ),
        ("CFG_READ", format!("{{{}}}", read.join(", "))),
        ("CHALLENGE_LEVELS", format!("{{{}}}", levels.join(", "))),
    ]
    .map(|(name, value)| (name.to_string(), value));
    strings.chain(indexes).chain(constants).collect()
}

/// The Lua tables the header can declare: (table, its fields with their
/// Lua values): the reply tags `R` ([`ReplyKind`]) and the records of
/// [`records`].
fn lua_tables() -> Vec<(&'static str, Vec<(String, String)>)> {
    let tags = ReplyKind::ALL
        .iter()
        .map(|k| (k.lua_field(), format!("'{}'", k.wire())))
        .collect();
    let records = records::tables().into_iter().map(|(table, fields, len)| {
        let fields = fields
            .iter()
            .map(|(name, at)| (name.to_string(), at.to_string()))
            .chain([("LEN".to_string(), len.to_string())])
            .collect();
        (table, fields)
    });
    // The stock's config fields and constants as one table (one Lua local
    // in every script that uses the prelude's `stock`).
    let stock = [
        ("LEFT", format!("'{}'", config::STOCK_LEFT)),
        ("SOLD", format!("'{}'", config::STOCK_SOLD)),
        ("OVERBOOK", format!("'{}'", config::STOCK_OVERBOOK)),
        ("BASE", format!("'{}'", config::STOCK_BASE)),
        ("MARGIN", format!("'{}'", config::STOCK_MARGIN)),
        ("CONV", format!("'{}'", config::STOCK_CONV)),
        ("PER_ORDER", format!("'{}'", config::STOCK_PER_ORDER)),
        ("OUT", format!("'{}'", config::STOCK_OUT)),
        ("MEASURED_AFTER", STOCK_MEASURED_AFTER.to_string()),
        ("MARGIN_MAX", STOCK_MARGIN_MAX_PER_MILLE.to_string()),
    ]
    .map(|(field, value)| (field.to_string(), value))
    .to_vec();
    [("R", tags), ("STOCK", stock)]
        .into_iter()
        .chain(records)
        .collect()
}

/// The Lua locals a script starts with: one per name above that `uses`
/// says the script needs, in the order declared here (so its hash is
/// stable), then each table it names with the fields it names. A script
/// cannot spell a field the Rust side does not know (Redis refuses reads
/// of undefined globals, and a test checks every name and table field a
/// script uses); declaring only what it uses keeps it far from Lua's 200
/// locals per function.
pub fn lua_header(uses: impl Fn(&str) -> bool) -> String {
    let mut out = String::from(
        "-- generated from shared/src/fields.rs: the contract names this script uses\n",
    );
    for (name, value) in lua_declarations() {
        if uses(&name) {
            out.push_str(&format!("local {name} = {value}\n"));
        }
    }
    for (table, fields) in lua_tables() {
        if uses(table) {
            let used: Vec<String> = fields
                .into_iter()
                .filter(|(field, _)| uses(field))
                .map(|(field, value)| format!("{field} = {value}"))
                .collect();
            out.push_str(&format!("local {table} = {{{}}}\n", used.join(", ")));
        }
    }
    out
}

/// Every Lua local [`lua_header`] can declare (a table's name once).
pub fn lua_names() -> Vec<String> {
    lua_declarations()
        .into_iter()
        .map(|(name, _)| name)
        .chain(lua_tables().into_iter().map(|(table, _)| table.to_string()))
        .collect()
}

/// Every field of each Lua table [`lua_header`] can declare.
pub fn lua_table_fields() -> Vec<(&'static str, Vec<String>)> {
    lua_tables()
        .into_iter()
        .map(|(table, fields)| (table, fields.into_iter().map(|(f, _)| f).collect()))
        .collect()
}

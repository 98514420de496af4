//! The macros that declare the data contract's names once for Rust and Lua
//! ([`fields`](crate::fields), [`keys`](crate::keys)).

/// Declares string constants and the table of their Lua local names.
macro_rules! names {
    ($(#[$m:meta])* $module:ident, $lua:literal { $($(#[$doc:meta])* $name:ident = $value:literal,)* }) => {
        $(#[$m])*
        pub mod $module {
            $($(#[$doc])* pub const $name: &str = $value;)*
            /// Every name: (Lua local, value).
            pub const ALL: &[(&str, &str)] = &[$((concat!($lua, stringify!($name)), $value)),*];
        }
    };
}

/// Declares the 1-based positions of a record's fields in the order they
/// are written (a `|`-joined record, a script's ARGV or an array reply):
/// the order is the declaration, so adding or moving a field moves every
/// position after it for Rust and for the scripts' Lua header at once.
macro_rules! record {
    ($(#[$m:meta])* $module:ident, $lua:literal { $($(#[$doc:meta])* $name:ident,)* }) => {
        $(#[$m])*
        pub mod $module {
            /// The fields in order; position 0 is no field (Lua counts from 1).
            #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
            #[repr(usize)]
            enum Position { _NONE, $($name),* }
            $($(#[$doc])* pub const $name: usize = Position::$name as usize;)*
            /// Every position: (Lua local, 1-based index).
            pub const ALL: &[(&str, usize)] = &[$((concat!($lua, stringify!($name)), $name)),*];
            /// Every position by its own name, as a field of the Lua table
            /// [`LUA`] (`WR.POSITION`).
            pub const FIELDS: &[(&str, usize)] = &[$((stringify!($name), $name)),*];
            /// How many fields the record has.
            pub const LEN: usize = ALL.len();
            /// The record's Lua prefix, or its table's name.
            pub const LUA: &str = $lua;
        }
    };
}

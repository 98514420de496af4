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

/// Declares 1-based field positions of a `|`-joined record.
macro_rules! layout {
    ($(#[$m:meta])* $module:ident, $lua:literal { $($(#[$doc:meta])* $name:ident = $value:literal,)* }) => {
        $(#[$m])*
        pub mod $module {
            $($(#[$doc])* pub const $name: usize = $value;)*
            /// Every position: (Lua local, 1-based index).
            pub const ALL: &[(&str, usize)] = &[$((concat!($lua, stringify!($name)), $value)),*];
        }
    };
}

//! `c_enum!`: the strict decoder (and encoder) of every enumeration that crosses the ABI.
//!
//! cbindgen reads the source as written and does not expand `macro_rules!` invocations, so the
//! C-visible items themselves (a `#[repr(u32)]` enum with its numbers and docs, or the
//! `pub const` values of a `u32` family) stay written out in the source, and this macro adds
//! what C never sees: the list of values, the checked decoding of a `uint32_t` (any other
//! number is `GPUSVC_INVALID_ARGUMENT`, never undefined behaviour) and the messages.

/// Three forms:
///
/// * `c_enum!(impl gpusvc_x { A, B, C })`: for a `#[repr(u32)]` enum written out in the
///   source, adds `ALL` (the variants, in the order listed), `all()`, `from_u32` and
///   `decode(value, what)`. The list is checked against the enum by an exhaustive `match`: a
///   variant left out does not compile.
/// * `c_enum!(impl gpusvc_x { A => "text", B => "text" })`: the same, plus `message()`.
/// * `c_enum!(fn decode_fn(/ encode_fn)? ("what") -> RustType { C_VALUE => rust_value, ... })`:
///   for a family of `pub const ...: u32` values, a strict decoder to a Rust value (`rust_value`
///   is any expression) and, with `/ encode_fn`, the encoder back (`rust_value` must then be a
///   path, as it is used as a pattern).
macro_rules! c_enum {
    (impl $t:ident { $($v:ident),+ $(,)? }) => {
        impl $t {
            /// Every value, in declaration order.
            pub const ALL: &'static [$t] = &[$($t::$v),+];

            /// Every value, in declaration order.
            pub fn all() -> &'static [$t] {
                // A variant missing from the list above fails this match.
                const _: fn($t) = |v| match v {
                    $($t::$v => ()),+
                };
                Self::ALL
            }

            /// The value with this number, if any.
            pub fn from_u32(value: u32) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| *v as u32 == value)
            }

            /// The value with this number; any other number is `GPUSVC_INVALID_ARGUMENT`.
            #[allow(dead_code, reason = "not every enumeration arrives from C")]
            pub(crate) fn decode(value: u32) -> Result<Self, $crate::kit::FfiError> {
                Self::from_u32(value).ok_or_else(|| {
                    $crate::kit::invalid_argument(format!(
                        concat!("unknown ", stringify!($t), " value {}"),
                        value
                    ))
                })
            }
        }
    };
    (impl $t:ident { $($v:ident => $msg:expr),+ $(,)? }) => {
        $crate::kit::c_enum!(impl $t { $($v),+ });

        impl $t {
            /// A short English description.
            pub fn message(self) -> &'static str {
                match self {
                    $($t::$v => $msg),+
                }
            }
        }
    };
    (fn $decode:ident($what:literal) -> $r:ty { $($c:expr => $val:expr),+ $(,)? }) => {
        #[allow(dead_code, reason = "an enumeration gpusvc only reports back has it for tests")]
        pub(crate) fn $decode(value: u32) -> Result<$r, $crate::kit::FfiError> {
            $(
                if value == $c {
                    return Ok($val);
                }
            )+
            Err($crate::kit::invalid_argument(format!(
                concat!("unknown ", $what, " value {}"),
                value
            )))
        }
    };
    (fn $decode:ident / $encode:ident ($what:literal) -> $r:ty {
        $($c:expr => $val:path),+ $(,)?
    }) => {
        $crate::kit::c_enum!(fn $decode($what) -> $r { $($c => $val),+ });

        pub(crate) fn $encode(value: $r) -> u32 {
            match value {
                $($val => $c),+
            }
        }
    };
}

pub(crate) use c_enum;

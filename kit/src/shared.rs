//! `Into…` traits for parameters that take a trait object: a value, or one already shared.
//!
//! kit never has an `x` / `x_arc` pair of methods: a method that stores a `dyn Trait` takes
//! `impl IntoTrait`, which both a value and an `Arc<dyn Trait>` implement.

/// Defines `$into`, with `$method` converting into `Arc<dyn $trait>`, for every value of the
/// trait, an `Arc` of one, and an `Arc<dyn $trait>`.
macro_rules! into_shared {
    ($(#[$meta:meta])* $into:ident :: $method:ident => $trait:path) => {
        $(#[$meta])*
        pub trait $into {
            /// The conversion.
            fn $method(self) -> std::sync::Arc<dyn $trait>;
        }

        impl<T: $trait> $into for T {
            fn $method(self) -> std::sync::Arc<dyn $trait> {
                std::sync::Arc::new(self)
            }
        }

        impl<T: $trait> $into for std::sync::Arc<T> {
            fn $method(self) -> std::sync::Arc<dyn $trait> {
                self
            }
        }

        impl $into for std::sync::Arc<dyn $trait> {
            fn $method(self) -> std::sync::Arc<dyn $trait> {
                self
            }
        }
    };
}

pub(crate) use into_shared;

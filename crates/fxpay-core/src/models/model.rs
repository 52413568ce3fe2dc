//! The one definition of a model: [`model!`] takes a struct as written (serde attributes and
//! all) and also gives it a [`Model`] impl that names its fields in declaration order and
//! visits them. Whatever shows a model elsewhere (the Python binding's classes, their
//! getters, `repr`, pickle, `to_dict`, keyword construction) is generated from that, so a
//! field is named once.
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::{Any, TypeId};

/// What a field takes when it is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// It must be given.
    Required,
    /// `None`.
    None,
    /// An empty list.
    Empty,
}

/// A type a model's field may have: inspected by type (`Any`) where it is shown, serde for
/// the wire. Only the types listed here may be fields, so whatever shows a model (the Python
/// binding) knows every one of them.
pub trait FieldType: Any + Clone + Serialize + DeserializeOwned + Send + Sync {
    /// What [`FieldType::absent`] gives.
    const ABSENT: Absent = Absent::Required;
    /// The value a field of this type takes when it is not given (`None`, an empty list);
    /// `None` when it must be given.
    fn absent() -> Option<Self> {
        None
    }
}

impl FieldType for String {}
impl FieldType for u64 {}
/// An instant, as unix seconds.
impl FieldType for f64 {}
impl FieldType for rust_decimal::Decimal {}
// A nested model or an enum is a field type too: models/mod.rs says so for each.
impl<T: FieldType> FieldType for Option<T> {
    const ABSENT: Absent = Absent::None;
    fn absent() -> Option<Self> {
        Some(None)
    }
}
impl<T: FieldType> FieldType for Vec<T> {
    const ABSENT: Absent = Absent::Empty;
    fn absent() -> Option<Self> {
        Some(Vec::new())
    }
}

/// Reads a model's fields one by one, in declaration order.
pub trait Visit {
    type Error;
    fn field<T: FieldType>(&mut self, name: &'static str, value: &T) -> Result<(), Self::Error>;
}

/// Supplies a model's fields one by one, in declaration order, to build one.
pub trait Build {
    type Error;
    fn field<T: FieldType>(&mut self, name: &'static str) -> Result<T, Self::Error>;
}

pub trait Model:
    Any + Clone + Serialize + Send + Sync + PartialEq + std::hash::Hash + std::fmt::Debug
{
    /// The type's name, as users see it.
    const NAME: &'static str;
    /// Field names, in declaration order.
    const FIELDS: &'static [&'static str];
    /// What each field takes when it is left out ([`FieldType::absent`]).
    const ABSENT: &'static [Absent];
    /// Fields never shown (repr, HTML, logs): tokens, verifiers, nonces.
    const SECRET: &'static [&'static str];
    /// Each field's type, in declaration order: whatever shows a model tells by it how a
    /// field crosses and what it is called there (the Python binding's stub types).
    const TYPES: &'static [fn() -> TypeId];
    fn visit<V: Visit>(&self, v: &mut V) -> Result<(), V::Error>;
    fn build<B: Build>(b: &mut B) -> Result<Self, B::Error>;
    /// Checks a model built from user input (not one read from the service): the one
    /// place its values are validated.
    fn check_new(&self) -> crate::error::Result<()>;
}

/// Declares a model: the struct exactly as written, and its [`Model`] impl.
///
/// ```ignore
/// model! {
///     #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
///     pub struct Token secret(access_token) { pub access_token: String, ... }
/// }
/// ```
macro_rules! model {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(secret($($secret:ident),*))? $(check($check:path))? {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name { $( $(#[$fmeta])* pub $field: $ty ),* }

        impl $crate::models::model::Model for $name {
            const NAME: &'static str = stringify!($name);
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
            const ABSENT: &'static [$crate::models::model::Absent] = &[$(<$ty as $crate::models::model::FieldType>::ABSENT),*];
            const SECRET: &'static [&'static str] = &[$($(stringify!($secret)),*)?];
            const TYPES: &'static [fn() -> ::std::any::TypeId] = &[$(::std::any::TypeId::of::<$ty>),*];
            fn visit<V: $crate::models::model::Visit>(&self, v: &mut V) -> ::std::result::Result<(), V::Error> {
                $( v.field(stringify!($field), &self.$field)?; )*
                Ok(())
            }
            fn check_new(&self) -> $crate::error::Result<()> {
                $( return $check(self); )?
                #[allow(unreachable_code)]
                Ok(())
            }
            fn build<B: $crate::models::model::Build>(b: &mut B) -> ::std::result::Result<Self, B::Error> {
                Ok($name { $( $field: b.field(stringify!($field))? ),* })
            }
        }
    };
}

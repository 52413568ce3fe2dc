//! `pymodel!`: a model class declared around its core struct, with everything `class.rs`
//! gives every model class.
/// Declares a model class around a core model. `money` models keep every number of
/// `to_dict()` exact; `raw` ones have `raw` and pickle it. Extra methods go in braces.
macro_rules! pymodel {
    (
        $(#[$meta:meta])*
        $name:ident($core:ty) { money: $money:literal, raw: true }
        { $($extra:tt)* }
    ) => {
        $crate::models::class::pymodel::pymodel! { @class $(#[$meta])* $name($core) $money {
            /// The whole JSON object the model was read from, unknown fields included
            /// (numbers exact: ``Decimal`` unless whole); an empty dict for one built by hand.
            /// A new dict on each access: changing it changes nothing in the model.
            #[getter]
            fn raw<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, PyAny>> {
                $crate::models::class::show::raw(slf)
            }

            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, pyo3::types::PyTuple>> {
                $crate::models::class::show::reduce(slf, true)
            }

            fn __setstate__(slf: &Bound<'_, Self>, state: &Bound<'_, PyAny>) -> PyResult<()> {
                $crate::models::class::show::set_raw(slf, state)
            }

            $($extra)*
        } }
    };
    (
        $(#[$meta:meta])*
        $name:ident($core:ty) { money: $money:literal, raw: false }
        { $($extra:tt)* }
    ) => {
        $crate::models::class::pymodel::pymodel! { @class $(#[$meta])* $name($core) $money {
            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, pyo3::types::PyTuple>> {
                $crate::models::class::show::reduce(slf, false)
            }

            $($extra)*
        } }
    };
    (@class $(#[$meta:meta])* $name:ident($core:ty) $money:literal { $($extra:tt)* }) => {
        $(#[$meta])*
        #[pyclass(frozen, eq, hash, module = "fxpay._fxpay")]
        pub struct $name {
            core: $core,
            slots: $crate::models::class::Slots,
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.core == other.core
            }
        }

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.core.hash(state)
            }
        }

        impl $crate::models::class::ModelClass for $name {
            type Core = $core;
            type Nested = NestedModels;
            const MONEY: bool = $money;
            fn core(&self) -> &$core {
                &self.core
            }
            fn slots(&self) -> &$crate::models::class::Slots {
                &self.slots
            }
            fn wrap(core: $core, raw: $crate::models::class::Raw) -> Self {
                let fields = <$core as fxpay_core::Model>::FIELDS.len();
                $name { core, slots: $crate::models::class::Slots::new(raw, fields) }
            }
        }

        #[pymethods]
        impl $name {
            #[new]
            #[pyo3(signature = (*args, **kwargs))]
            fn __new__(
                args: &Bound<'_, pyo3::types::PyTuple>,
                kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> PyResult<Self> {
                let core = $crate::models::class::construction::new::<Self>(args, kwargs)?;
                Ok(<Self as $crate::models::class::ModelClass>::wrap(core, $crate::models::class::Raw::None))
            }

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                $crate::models::class::show::repr(slf)
            }

            fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
                $crate::models::class::show::repr_html(slf)
            }

            /// The wire form: camelCase keys, amounts as ``Decimal``.
            fn to_dict<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, PyAny>> {
                $crate::models::class::show::to_dict(slf)
            }

            /// A copy with the given fields changed, checked as a new model.
            #[pyo3(signature = (**changes))]
            fn replace(
                slf: &Bound<'_, Self>,
                changes: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> PyResult<Self> {
                let core = $crate::models::class::construction::replace(slf, changes)?;
                Ok(<Self as $crate::models::class::ModelClass>::wrap(core, $crate::models::class::Raw::None))
            }

            fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
                slf
            }

            fn __deepcopy__<'py>(slf: Bound<'py, Self>, memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
                let _ = memo;
                slf
            }

            $($extra)*
        }
    };
}
pub(crate) use pymodel;

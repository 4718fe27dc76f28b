//! Values for property tests: JSON of any shape, with any text and any number in it.

use proptest::prelude::*;
use serde_json::Value;

/// A JSON value of any shape, nested three deep: every kind of number, any text, and text
/// made of the characters JSON must escape or may (controls, quotes, `\\`, `/`, DEL, all
/// of Unicode).
pub(crate) fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        "[\\x00-\\x20\"\\\\/\\x7f\u{80}-\u{10ffff}a]{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

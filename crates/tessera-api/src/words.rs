//! What every protocol's wire types are made of: closed sets of words
//! (`wire_words!`) and fields that are a string or a list ([`TextOr`]).

/// A closed set of words, each a unit variant, parsed from its string with
/// an error that lists the words.
macro_rules! wire_words {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $($(#[$variant_meta:meta])* $variant:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// The word on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                match text.as_str() {
                    $($word => Ok(Self::$variant),)+
                    other => Err(<D::Error as ::serde::de::Error>::custom(format!(
                        "unknown {} `{other}` (expected {})",
                        $what,
                        [$(concat!("`", $word, "`")),+].join(", "),
                    ))),
                }
            }
        }
    };
}

/// A field that is a string or a list of `T` (message contents, blocks,
/// input items), deserialized by the JSON type it meets rather than
/// `untagged`, so an error inside a list keeps its path and its message.
#[derive(Debug, Clone, PartialEq, ::serde::Serialize)]
#[serde(untagged)]
pub enum TextOr<T> {
    /// Plain text.
    Text(String),
    /// A list.
    List(Vec<T>),
}

/// What a list of `Self` is called in errors ("content parts").
pub trait Listed {
    /// The list's name.
    const LIST: &'static str;
}

impl<T> Default for TextOr<T> {
    fn default() -> Self {
        Self::List(Vec::new())
    }
}

impl<'de, T: ::serde::Deserialize<'de> + Listed> ::serde::Deserialize<'de> for TextOr<T> {
    fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either<T>(std::marker::PhantomData<T>);
        impl<'de, T: ::serde::Deserialize<'de> + Listed> ::serde::de::Visitor<'de> for Either<T> {
            type Value = TextOr<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a string or a list of {}", T::LIST)
            }
            fn visit_str<E: ::serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(text.to_string()))
            }
            fn visit_seq<A: ::serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let list = ::serde::de::value::SeqAccessDeserializer::new(seq);
                <Vec<T> as ::serde::Deserialize>::deserialize(list).map(TextOr::List)
            }
        }
        deserializer.deserialize_any(Either(std::marker::PhantomData))
    }
}

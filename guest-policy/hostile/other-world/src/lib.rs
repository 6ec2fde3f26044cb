//! Hostile test component `other-world`: a valid component that exports
//! another world; loading it as a policy must fail with a clear error.

wit_bindgen::generate!({ path: "wit", world: "greeter" });

struct Greeter;

impl Guest for Greeter {
    fn greet(who: String) -> String {
        format!("hello, {who}")
    }
}

export!(Greeter);

// The built-in PII types are email, credit_card, ip, mac_address and url; a type of your own
// needs a regex or a detector.
#[kit::agent(model = "openai:gpt-4o-mini", pii< emial(redact) >)]
struct Helper;

fn main() {}

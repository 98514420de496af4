//! The client address a budget is kept for: an IPv4 address, or the /64 of
//! an IPv6 one (one home or phone gets a whole /64, so a single address
//! would be free to rotate).

use std::fmt;
use std::net::IpAddr;

/// A validated address group, safe inside a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress(String);

impl ClientAddress {
    /// From a `CF-Connecting-IP` value; None when it is not an address.
    pub fn parse(header: &str) -> Option<ClientAddress> {
        let ip: IpAddr = header.trim().parse().ok()?;
        Some(ClientAddress(match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => {
                    let s = v6.segments();
                    format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
                }
            },
        }))
    }

    /// All requests without a usable address share this one budget, so a
    /// deployment that loses the header cannot be flooded through the gap.
    pub fn unknown() -> ClientAddress {
        ClientAddress("unknown".into())
    }

    /// The group as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_is_grouped_by_its_64() {
        let a = ClientAddress::parse("2001:db8:1:2:aaaa::1").unwrap();
        let b = ClientAddress::parse("2001:0db8:0001:0002:ffff:1:2:3").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "2001:db8:1:2::/64");
        assert_ne!(a, ClientAddress::parse("2001:db8:1:3::1").unwrap());
    }

    #[test]
    fn ipv4_and_mapped_ipv4_are_one_address() {
        assert_eq!(
            ClientAddress::parse(" 203.0.113.7 ").unwrap().as_str(),
            "203.0.113.7"
        );
        assert_eq!(
            ClientAddress::parse("::ffff:203.0.113.7").unwrap().as_str(),
            "203.0.113.7"
        );
    }

    #[test]
    fn garbage_is_no_address() {
        for bad in ["", "a{b}", "1.2.3", "203.0.113.7, 10.0.0.1", "localhost"] {
            assert_eq!(ClientAddress::parse(bad), None, "{bad:?}");
        }
    }
}

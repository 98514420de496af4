//! The client address a budget is kept for: an IPv4 address, or the /64 of
//! an IPv6 one (one home or phone gets a whole /64, so a single address
//! would be free to rotate).
//!
//! The draw at an opening is fair per address group (docs/drop-day.md), and
//! an IPv6 visitor is also counted in the /56 and the /48 around its /64:
//! a site that holds a whole /48 has 65,536 /64s to pose as, so the draw
//! counts a /56 as at most [`PER_56`] addresses and a /48 as at most
//! [`PER_48`] ([`ClientAddress::wider`] gives their names).

use std::fmt;
use std::net::IpAddr;

/// The most /64s of one /56 the draw counts as separate addresses: a home
/// subscriber is typically delegated a /56 and puts a few networks in it.
pub const PER_56: u64 = 4;
/// The most /64s of one /48 the draw counts as separate addresses: a /48
/// is one site (a business, a campus, a hosting customer).
pub const PER_48: u64 = 16;

/// A validated address group, safe inside a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress {
    group: String,
    /// An IPv6 group's first four segments (its /64).
    v6: Option<[u16; 4]>,
}

impl ClientAddress {
    /// From a `CF-Connecting-IP` value; None when it is not an address.
    pub fn parse(header: &str) -> Option<ClientAddress> {
        let ip: IpAddr = header.trim().parse().ok()?;
        let v4 = |group: String| ClientAddress { group, v6: None };
        Some(match ip {
            IpAddr::V4(a) => v4(a.to_string()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(a) => v4(a.to_string()),
                None => {
                    let s = v6.segments();
                    ClientAddress {
                        group: format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3]),
                        v6: Some([s[0], s[1], s[2], s[3]]),
                    }
                }
            },
        })
    }

    /// An IPv6 group's /56 and /48, as the draw counts them (`None` for
    /// IPv4 and the unknown group).
    pub fn wider(&self) -> Option<(String, String)> {
        let s = self.v6?;
        Some((
            format!("{:x}:{:x}:{:x}:{:x}::/56", s[0], s[1], s[2], s[3] & 0xff00),
            format!("{:x}:{:x}:{:x}::/48", s[0], s[1], s[2]),
        ))
    }

    /// All requests without a usable address share this one budget, so a
    /// deployment that loses the header cannot be flooded through the gap.
    pub fn unknown() -> ClientAddress {
        ClientAddress {
            group: "unknown".into(),
            v6: None,
        }
    }

    /// The group as text.
    pub fn as_str(&self) -> &str {
        &self.group
    }
}

impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.group)
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
    fn an_ipv6_group_knows_its_56_and_48() {
        let a = ClientAddress::parse("2001:db8:1:2a3:aaaa::1").unwrap();
        assert_eq!(
            a.wider(),
            Some((
                "2001:db8:1:200::/56".to_string(),
                "2001:db8:1::/48".to_string()
            ))
        );
        // Two /64s of one /56 share both; another /56 of the /48 shares
        // only the /48.
        let b = ClientAddress::parse("2001:db8:1:2ff::9").unwrap();
        let c = ClientAddress::parse("2001:db8:1:300::9").unwrap();
        assert_eq!(a.wider(), b.wider());
        assert_eq!(a.wider().unwrap().1, c.wider().unwrap().1);
        assert_ne!(a.wider().unwrap().0, c.wider().unwrap().0);
        for v4 in ["203.0.113.7", "::ffff:203.0.113.7"] {
            assert_eq!(ClientAddress::parse(v4).unwrap().wider(), None);
        }
        assert_eq!(ClientAddress::unknown().wider(), None);
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

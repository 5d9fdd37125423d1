//! Which addresses `web_fetch` may connect to, checked on what a host resolves to (not on
//! how the URL spells it), and the DNS resolver that enforces it on every connection,
//! redirects included. A name that resolves to a private address is refused at connect
//! time, so a DNS answer that changes between a check and the connection cannot slip past.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why an address is not public, as the refusal names it.
fn private_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => {
            // `::ffff:127.0.0.1` and `::127.0.0.1` reach the IPv4 address.
            if let Some(v4) = v6.to_ipv4_mapped().or_else(|| compatible_v4(v6)) {
                return v4_kind(v4);
            }
            v6_kind(v6)
        }
    }
}

/// The IPv4 address of a deprecated IPv4-compatible IPv6 address (`::a.b.c.d`).
fn compatible_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    (s[..6].iter().all(|&x| x == 0) && !v6.is_loopback() && !v6.is_unspecified())
        .then(|| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        Some("a broadcast, multicast or reserved address")
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if ip.is_unique_local() {
        Some("a private address")
    } else if ip.is_unicast_link_local() {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else {
        None
    }
}

/// A connection `web_fetch` refused: the host, the address it reached and why.
#[derive(Debug, thiserror::Error)]
#[error(
    "{host} is {addr}, {kind}; web_fetch does not reach loopback, link-local or private \
     addresses unless `[tools] web_fetch_allow_private = true`"
)]
pub struct AddressRefused {
    /// The host as the URL named it.
    pub host: String,
    /// The address it is or resolved to.
    pub addr: IpAddr,
    /// What kind of address it is.
    pub kind: &'static str,
}

/// Which addresses may be reached.
#[derive(Debug, Clone, Copy)]
pub struct AddressPolicy {
    /// Reach private, loopback and link-local addresses too.
    pub allow_private: bool,
}

impl AddressPolicy {
    /// `Err` when `ip` may not be reached under this policy.
    pub fn check(self, host: &str, ip: IpAddr) -> Result<(), AddressRefused> {
        match private_kind(ip) {
            Some(kind) if !self.allow_private => Err(AddressRefused {
                host: host.to_string(),
                addr: ip,
                kind,
            }),
            _ => Ok(()),
        }
    }
}

/// The system resolver, keeping only the addresses the policy allows; a name with none
/// left fails with [`AddressRefused`].
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver(pub AddressPolicy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.check(&host, a.ip()) {
                    Ok(()) => true,
                    Err(e) => {
                        refused.get_or_insert(e);
                        false
                    }
                })
                .collect();
            match refused {
                Some(e) if allowed.is_empty() => Err(e.into()),
                _ => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> bool {
        let policy = AddressPolicy {
            allow_private: false,
        };
        policy.check("h", ip.parse().unwrap()).is_err()
    }

    #[test]
    fn private_loopback_and_link_local_addresses_are_refused_in_every_spelling() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
        ] {
            assert!(refused(ip), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "172.32.0.1"] {
            assert!(!refused(ip), "{ip}");
        }
        let open = AddressPolicy {
            allow_private: true,
        };
        assert!(open.check("h", "127.0.0.1".parse().unwrap()).is_ok());
    }

    #[tokio::test]
    async fn names_are_checked_on_what_they_resolve_to() {
        let resolver = GuardedResolver(AddressPolicy {
            allow_private: false,
        });
        let Err(err) = resolver.resolve("localhost".parse().unwrap()).await else {
            panic!("localhost must be refused");
        };
        let refused = err.downcast_ref::<AddressRefused>().unwrap();
        assert_eq!(refused.kind, "a loopback address");
        let open = GuardedResolver(AddressPolicy {
            allow_private: true,
        });
        let addrs: Vec<SocketAddr> = match open.resolve("localhost".parse().unwrap()).await {
            Ok(a) => a.collect(),
            Err(e) => panic!("{e}"),
        };
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}

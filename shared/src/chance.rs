//! A waiting visitor's chance that stock remains at its turn (docs/drop-
//! day.md, *Stock*): from its place, the units left and the drop's
//! measured conversion and units per order. Pure, so the edge computes it
//! from its snapshot with no Redis call.
//!
//! Everyone in front (the `position - 1` visitors ahead in line) orders
//! with the measured conversion `c`, each order taking `u` units. The
//! turns already out are left out: the simulator found them mostly
//! no-shows by the time a line forms (a buyer's turn ends within a minute,
//! a no-show's only when its token expires), and counting them as buyers
//! doubled the estimate's Brier score (0.134 against 0.071; BENCHMARKS.md,
//! *Stock*).
//! Stock remains at the visitor's turn when those orders take fewer than
//! the units left: P(u · Binomial(n, c) < left), read from the normal
//! approximation with a continuity correction. Before the conversion is
//! measured (fewer than `STOCK_MEASURED_AFTER` turns ended) `c` is 1:
//! everyone ahead buys, the cautious answer (certain within the stock,
//! none beyond it). The simulator measures how well it is calibrated
//! (BENCHMARKS.md, *Stock*).

/// What the estimate needs of a kept stock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StockView {
    /// Units left for sale (held units not counted).
    pub left: u64,
    /// Turns out: tokens issued and not spent.
    pub out: u64,
    /// Orders per ended turn, in [0, 1] (None: not measured yet).
    pub conversion: Option<f64>,
    /// Mean units per order (None: no order yet).
    pub units_per_order: Option<f64>,
}

impl StockView {
    /// Sold out: no unit left.
    pub fn sold_out(&self) -> bool {
        self.left == 0
    }
}

/// The chance in percent (0 to 100) that stock remains when the visitor at
/// 1-based `position` has its turn.
pub fn chance_percent(position: u64, stock: &StockView) -> u8 {
    if stock.left == 0 {
        return 0;
    }
    let c = stock.conversion.unwrap_or(1.0).clamp(0.0, 1.0);
    let u = stock.units_per_order.unwrap_or(1.0).max(1.0);
    let ahead = position.saturating_sub(1) as f64;
    // The most orders ahead that still leave a unit: orders × u < left.
    let orders_fit = ((stock.left as f64 - 1.0) / u).floor();
    let mean = ahead * c;
    let sd = (ahead * c * (1.0 - c)).sqrt();
    let p = if sd < 1e-9 {
        if mean <= orders_fit {
            1.0
        } else {
            0.0
        }
    } else {
        normal_cdf((orders_fit + 0.5 - mean) / sd)
    };
    (p * 100.0).round().clamp(0.0, 100.0) as u8
}

/// Φ(x), the standard normal distribution function (Abramowitz and
/// Stegun 7.1.26 for erf: error below 1.5e-7, far under a percent).
fn normal_cdf(x: f64) -> f64 {
    let z = x / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    let erf = if z < 0.0 { -erf } else { erf };
    0.5 * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stock(left: u64, out: u64, conversion: Option<f64>) -> StockView {
        StockView {
            left,
            out,
            conversion,
            units_per_order: None,
        }
    }

    #[test]
    fn unmeasured_everyone_ahead_buys() {
        let s = stock(10, 5, None);
        // Places 1 to 10 still find a unit, 11 does not (the 5 turns out
        // are not counted: mostly no-shows by then).
        assert_eq!(chance_percent(10, &s), 100);
        assert_eq!(chance_percent(11, &s), 0);
        assert_eq!(chance_percent(1, &stock(0, 0, None)), 0);
    }

    #[test]
    fn a_measured_conversion_gives_the_places_beyond_the_stock_a_chance() {
        // Half of the turns buy: 100 units last about 200 turns.
        let s = stock(100, 0, Some(0.5));
        assert!(chance_percent(150, &s) >= 99);
        let at_edge = chance_percent(201, &s);
        assert!((40..=60).contains(&at_edge), "{at_edge}");
        assert!(chance_percent(260, &s) <= 1);
        // It never rises further back.
        let mut last = 100;
        for p in (1..400).step_by(7) {
            let c = chance_percent(p, &s);
            assert!(c <= last, "{p}: {c} > {last}");
            last = c;
        }
    }

    #[test]
    fn orders_of_several_units_end_the_stock_sooner() {
        let one = stock(100, 0, Some(0.5));
        let two = StockView {
            units_per_order: Some(2.0),
            ..one
        };
        assert!(chance_percent(150, &two) < chance_percent(150, &one));
    }

    #[test]
    fn the_distribution_function_is_right_where_it_matters() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-6);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-3);
        assert!((normal_cdf(-1.0) - 0.158_655).abs() < 1e-4);
    }
}

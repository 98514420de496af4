//! The waiting line of the simulation: tickets in arrival order, with the
//! position of any ticket (waiting tickets at or before it) in O(log n),
//! as `ZRANK` + 1 gives it in Redis.

/// Waiting tickets `0..capacity`, a Fenwick tree of 0/1 flags.
#[derive(Debug, Clone)]
pub struct Line {
    tree: Vec<u32>,
    waiting: Vec<bool>,
    next_ticket: usize,
    head: usize,
    len: usize,
}

impl Line {
    /// An empty line that can hand out `capacity` tickets.
    pub fn new(capacity: usize) -> Line {
        Line {
            tree: vec![0; capacity + 1],
            waiting: vec![false; capacity],
            next_ticket: 0,
            head: 0,
            len: 0,
        }
    }

    /// People waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nobody waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tickets handed out so far (the next ticket's number).
    pub fn issued(&self) -> usize {
        self.next_ticket
    }

    /// True while `ticket` waits (issued, neither admitted nor dropped).
    pub fn contains(&self, ticket: usize) -> bool {
        self.waiting.get(ticket).copied().unwrap_or(false)
    }

    /// A new ticket at the back.
    pub fn join(&mut self) -> usize {
        let t = self.next_ticket;
        self.next_ticket += 1;
        self.set(t, true);
        t
    }

    /// Takes a ticket out (admitted or dropped); false if it was not waiting.
    pub fn remove(&mut self, ticket: usize) -> bool {
        if !self.waiting[ticket] {
            return false;
        }
        self.set(ticket, false);
        true
    }

    /// Takes the first waiting ticket out.
    pub fn pop_front(&mut self) -> Option<usize> {
        while self.head < self.next_ticket && !self.waiting[self.head] {
            self.head += 1;
        }
        (self.head < self.next_ticket).then(|| {
            let t = self.head;
            self.set(t, false);
            t
        })
    }

    /// 1-based position of a waiting ticket; for any other ticket, the
    /// waiting tickets before it.
    pub fn position(&self, ticket: usize) -> u64 {
        let mut i = ticket + 1;
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i &= i - 1;
        }
        sum
    }

    fn set(&mut self, ticket: usize, on: bool) {
        self.waiting[ticket] = on;
        if on {
            self.len += 1;
        } else {
            self.len -= 1;
        }
        let mut i = ticket + 1;
        while i < self.tree.len() {
            if on {
                self.tree[i] += 1;
            } else {
                self.tree[i] -= 1;
            }
            i += i & i.wrapping_neg();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_waiting_tickets_ahead() {
        let mut line = Line::new(10);
        let t: Vec<usize> = (0..5).map(|_| line.join()).collect();
        assert_eq!(line.position(t[4]), 5);
        assert!(line.remove(t[2]));
        assert!(!line.remove(t[2]));
        assert_eq!(line.position(t[4]), 4);
        assert_eq!(line.pop_front(), Some(t[0]));
        assert_eq!(line.pop_front(), Some(t[1]));
        assert_eq!(line.pop_front(), Some(t[3]));
        assert_eq!(line.position(t[4]), 1);
        assert_eq!(line.len(), 1);
        assert_eq!(line.issued(), 5);
        assert!(line.contains(t[4]) && !line.contains(t[3]) && !line.contains(7));
    }
}

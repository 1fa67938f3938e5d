//! One item per key of a call, held on the stack for up to [`FEW`] keys: a call over a few keys
//! (every single-limiter command, and RL.ALL as it is used) allocates nothing for its keys.

use std::fmt;
use std::ops::{Deref, DerefMut};

use smallvec::SmallVec;

/// Keys of one call held on the stack; a call over more spills to the heap.
pub const FEW: usize = 4;

/// A vector of one item per key of a call, on the stack for up to [`FEW`] items.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Few<T>(SmallVec<[T; FEW]>);

impl<T> Few<T> {
    /// An empty vector with room for `n` items: on the stack, built in place, for up to
    /// [`FEW`].
    #[inline(always)]
    pub fn with_capacity(n: usize) -> Self {
        if n <= FEW {
            Few(SmallVec::new())
        } else {
            Few(SmallVec::with_capacity(n))
        }
    }

    /// `n` copies of `item`.
    pub fn from_elem(item: T, n: usize) -> Self
    where
        T: Clone,
    {
        Few(SmallVec::from_elem(item, n))
    }

    /// Append `item`.
    #[inline(always)]
    pub fn push(&mut self, item: T) {
        self.0.push(item);
    }
}

impl<T> Deref for Few<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T> DerefMut for Few<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: fmt::Debug> fmt::Debug for Few<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> FromIterator<T> for Few<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Few(iter.into_iter().collect())
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = smallvec::IntoIter<[T; FEW]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Few<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut Few<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl<T: PartialEq, const N: usize> PartialEq<[T; N]> for Few<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self.0.as_slice() == other.as_slice()
    }
}

impl<T: PartialEq> PartialEq<Vec<T>> for Few<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.0.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_spills_past_its_inline_room_and_compares_as_a_slice() {
        let mut v: Few<u64> = (0..FEW as u64).collect();
        assert_eq!(v, [0, 1, 2, 3]);
        v.push(4);
        assert_eq!(v, vec![0, 1, 2, 3, 4]);
        assert_eq!(Few::from_elem(7u8, 2), [7, 7]);
        assert_eq!(v.into_iter().sum::<u64>(), 10);
    }
}

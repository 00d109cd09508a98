// Which settings a reload can apply and which need a restart (tests of the comparison).

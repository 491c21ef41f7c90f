/* unjoined_account — verdict: assertion.  In the spirit of SCTBench's account_bad.
 *
 * main starts a checker, a depositor and a withdrawer, and returns from main
 * without joining any of them: the process ends (exit_group) under threads that
 * may not have run yet.  The checker asserts a wrong balance, but only once both
 * other threads have updated it; so the failure needs main to be preempted before
 * it returns, and the checker to run after the other two.  Natively the process
 * usually ends first.  A reduction that forgets that the exit ends the other
 * threads (so that running them before it is a different execution) calls this
 * program proved correct. */
#include <assert.h>
#include <pthread.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int balance, deposit_amount, withdraw_amount, opening;
static int deposited, withdrawn;

static void *deposit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    balance += deposit_amount;
    deposited = 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *withdraw(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    balance -= withdraw_amount;
    withdrawn = 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *check(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    if (deposited && withdrawn)
        assert(balance == opening - deposit_amount - withdraw_amount); /* wrong sign */
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t c, d, w;
    opening = 1;
    deposit_amount = 2;
    withdraw_amount = 4;
    balance = opening;
    pthread_create(&c, NULL, check, NULL);
    pthread_create(&d, NULL, deposit, NULL);
    pthread_create(&w, NULL, withdraw, NULL);
    return 0;
}

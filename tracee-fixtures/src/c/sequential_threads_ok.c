/* Creates three threads one after another, joining each before creating the next: no two
 * threads can ever run at the same scheduling point, so there is nothing to schedule and
 * one execution covers every schedule (mcheck says "no scheduling choice arose").
 * Correct: the counter ends at 3, no race (each join orders the next thread after). */
#include <pthread.h>

#include "common.h"

static int counter;

static void *bump(void *arg)
{
    (void)arg;
    counter++;
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, bump, NULL));
        CHECK(pthread_join(t, NULL));
    }
    return counter == 3 ? 0 : 1;
}

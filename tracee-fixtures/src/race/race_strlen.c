/* race_strlen — verdict: data_race.
 *
 * One thread changes byte 18 of a 20-character string without a lock while another takes
 * its length with strlen.  The race is on that one byte, which strlen reads only because
 * the string goes on past it: mcheck models the program's strlen call as a read of the
 * string with its NUL, measured where the call is logged (at the PLT stub, without a stop),
 * so it finds the race only if it measures the whole string. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char text[32] = "0123456789abcdefghij";
static size_t total;

static void *changer(void *arg)
{
    (void)arg;
    text[18] = 'X';
    return NULL;
}

static void *measurer(void *arg)
{
    (void)arg;
    total += strlen(text);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, changer, NULL);
    pthread_create(&b, NULL, measurer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%zu %s\n", total, text);
    return 0;
}
